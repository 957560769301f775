/* eval_text.c — the generated texts of eval_text.h. */
#include "eval_text.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Filler: plain sentences about nothing in particular, picked by a fixed
 * pseudo-random sequence so that the text is not one phrase repeated (a
 * retrieval cache over exact repeats would be a degenerate test). */
static const char *const k_filler[] = {
    "The river ran slowly past the old mill, and nobody in the village paid it any mind.",
    "A grey cat slept on the warm stones of the bakery wall until the afternoon bell.",
    "Every morning the carts went down the hill to the market and came back a little lighter.",
    "The schoolmaster kept a ledger of the weather, though he never said what it was for.",
    "Rain in the valley meant mud on the roads and long evenings by the stove.",
    "In the orchard the apples ripened one row at a time, from the south fence northward.",
    "The ferryman counted his passengers twice, once at each bank, and wrote neither number down.",
    "Two brothers repaired the bridge every spring and argued every spring about the nails.",
    "The inn had seven rooms, a crooked sign and a kitchen that smelled of onions.",
    "Snow came late that year, and the children waited for it at the windows.",
    "The clock in the square ran four minutes fast, and the whole town had learned to allow for it.",
    "Along the canal the barges moved coal in winter and hay in summer.",
};

static unsigned next_rand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

unsigned eval_passkey_number(unsigned seed) {
    unsigned s = seed * 2654435761u + 17u;
    next_rand(&s);
    return 10000u + (next_rand(&s) * 32768u + next_rand(&s)) % 90000u;
}

char *eval_haystack(int chars, double depth, unsigned key, size_t *len) {
    size_t cap = (size_t)(chars > 0 ? chars : 0) + 512;
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t n = 0, key_at = (size_t)(depth * (double)(chars > 0 ? chars : 0));
    bool key_done = key == 0;
    unsigned s = 12345u;
    const size_t n_filler = sizeof k_filler / sizeof k_filler[0];
    while (n < (size_t)chars || !key_done) {
        char sentence[256];
        if (!key_done && n >= key_at) {
            snprintf(sentence, sizeof sentence, "The pass key is %05u. Remember it: %05u is the pass key. ", key, key);
            key_done = true;
        } else {
            snprintf(sentence, sizeof sentence, "%s ", k_filler[next_rand(&s) % n_filler]);
        }
        size_t k = strlen(sentence);
        if (n + k + 1 > cap) {
            cap = (n + k + 1) * 2;
            char *grown = realloc(out, cap);
            if (!grown) {
                free(out);
                return NULL;
            }
            out = grown;
        }
        memcpy(out + n, sentence, k);
        n += k;
    }
    out[n] = 0;
    *len = n;
    return out;
}

char *eval_passkey_prompt(int chars, double depth, unsigned key, size_t *len) {
    static const char head[] = "A pass key is hidden somewhere in the long text below. Read it all, find the pass "
                               "key and remember it; you will be asked for it at the end.\n\n";
    static const char tail[] = "\n\nWhat is the pass key? The pass key is";
    size_t hl;
    char *hay = eval_haystack(chars, depth, key, &hl);
    if (!hay) return NULL;
    size_t n = sizeof head - 1 + hl + sizeof tail - 1;
    char *out = malloc(n + 1);
    if (out) {
        memcpy(out, head, sizeof head - 1);
        memcpy(out + sizeof head - 1, hay, hl);
        memcpy(out + sizeof head - 1 + hl, tail, sizeof tail);
        *len = n;
    }
    free(hay);
    return out;
}
