"""The data stage: the GLUE task files and their checksums, tokenizing with word ids, batching, and the
GLUE metrics."""
