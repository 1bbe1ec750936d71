"""The simulated board under everything else: shared DDR (segments, owners, quota, access lists),
the runtime directory and its pid files, logs in the DSP format, process helpers, CURVE keys,
ownership proofs. Imports only ``protocol`` (and third-party libraries)."""
