/* The J5 samples include <dnn/hb_dnn.h>: the same header as <hb_dnn.h>. */
#include "../hb_dnn.h"
