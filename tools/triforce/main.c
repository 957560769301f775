/* main.c — the `triforce` command: dispatches to subcommands. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        printf("usage: triforce <command> [options]\n");
        return argc < 2 ? 1 : 0;
    }
    fprintf(stderr, "triforce: unknown command '%s'\n", argv[1]);
    return 1;
}
