"""Launch configurations chosen from measurements, shared by the solutions that use them.

Each entry says where its numbers come from; scripts/sweep_configs.py re-measures them on a GPU.
"""

import triton


def row_config(n_cols, element_size):
    """(ROWS, BLOCK_N, num_warps) for rows of n_cols elements of element_size bytes.

    From a sweep of rows per program and warps for 4096 rows on an H200 (results/sweep_rows_h200.json,
    scripts/sweep_configs.py; softmax and layernorm timed together, the configuration whose slower of
    the two is closest to its best): short rows are packed several to
    a program so each program has enough loads in flight; long rows get more warps. Used by
    solutions/softmax.py and solutions/layernorm.py.
    """
    BLOCK_N = triton.next_power_of_2(n_cols)
    table = {  # BLOCK_N: (ROWS, num_warps) for 2-byte and for 4-byte elements
        512: ((2, 1), (2, 4)),
        1024: ((2, 2), (4, 4)),
        2048: ((1, 4), (2, 8)),
        4096: ((1, 8), (2, 8)),
        8192: ((1, 8), (1, 16)),
    }
    if BLOCK_N in table:
        ROWS, num_warps = table[BLOCK_N][element_size > 2]
    elif BLOCK_N < 512:
        ROWS, num_warps = 2048 // BLOCK_N, 2
    else:
        ROWS, num_warps = 1, 16
    return ROWS, BLOCK_N, num_warps
