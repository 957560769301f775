/* eval_text.h — generated texts for `triforce eval`: a filler haystack and a
 * passkey prompt (no data files needed; deterministic). */
#ifndef TF_EVAL_TEXT_H
#define TF_EVAL_TEXT_H

#include <stddef.h>

/* About `chars` bytes of filler sentences; with key != 0 the sentence stating
 * the passkey is placed at fraction `depth` (0 = start, 1 = end) of the
 * filler. malloc'ed, NUL-terminated; *len its length. NULL if out of memory. */
char *eval_haystack(int chars, double depth, unsigned key, size_t *len);

/* The passkey task: an instruction, the haystack with the key at `depth`, and
 * the question, ending where the answer begins. */
char *eval_passkey_prompt(int chars, double depth, unsigned key, size_t *len);

/* A five-digit number (10000..99999) from a seed. */
unsigned eval_passkey_number(unsigned seed);

#endif
