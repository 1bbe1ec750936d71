/* The J5 samples include <dnn/hb_sys.h>: the same header as <hb_sys.h>. */
#include "../hb_sys.h"
