/*
 * outpath.h — checks on an output path before anything is written to it.
 *
 * Outputs are written to OUT.partial and renamed over OUT, so an existing OUT
 * is replaced whatever it is. Two cases must be refused instead: OUT is not a
 * regular file (a device such as /dev/null, a FIFO, a directory: renaming
 * would replace the node with a file), and OUT is one of the files the output
 * is made from (it would replace the input, or, for a checkpoint directory,
 * one of its shards). Files are compared by device and inode, so hard links
 * and other spellings of the same path are caught.
 */
#ifndef TF_CORE_OUTPATH_H
#define TF_CORE_OUTPATH_H

#include "core/error.h"

/* TF_OK when out does not exist or is a regular file that is not `in` (a file)
 * nor a file directly inside `in` (a directory); in may be NULL. Errors name
 * the path and what was expected (TF_ERR_INVALID_ARG). */
tf_status tf_out_path_check(const char *out, const char *in, tf_err *err);

#endif
