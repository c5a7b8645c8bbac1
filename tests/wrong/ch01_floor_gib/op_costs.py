"""A deliberately wrong op_costs submission (the rest is the reference solution).

What is wrong: floor_ms() takes GB/s as 2^30 bytes per second.

No kernel here: plain Python that counts. The grader calls each function with fresh arguments and
compares the answers with the course's reference, which follows these conventions:

Bytes are the fewest any implementation must move to and from device memory: every input read
once, every output written once, nothing else. Intermediate values (a row's maximum, x + bias) stay
on the chip and cost no bytes. A tensor of n elements of ``dtype_bytes`` bytes each is
n * dtype_bytes bytes (fp32: 4, fp16 and bf16: 2).

FLOPs count one per addition, subtraction, multiplication, division or comparison, and one per exp
or tanh. A fused multiply-add counts 2 (it is a multiplication and an addition).

Peaks come in decimal units: GB/s is 10^9 bytes per second, TFLOP/s 10^12 FLOP per second.
"""


def vector_add_cost(n, dtype_bytes):
    """out = x + y, where x, y and out are vectors of n elements.

    Returns (bytes, flops).
    """
    n_bytes = 3 * n * dtype_bytes  # read x and y, write out
    n_flops = n  # one addition per element
    return n_bytes, n_flops


def matmul_cost(M, N, K, dtype_bytes):
    """C = A @ B, where A is (M, K), B is (K, N) and C is (M, N), all of one dtype.

    Each element of C is the dot product of a row of A and a column of B: K multiply-adds.
    Returns (bytes, flops).
    """
    n_bytes = (M * K + K * N + M * N) * dtype_bytes  # read A and B, write C
    n_flops = 2 * M * N * K  # a multiply and an add per pair
    return n_bytes, n_flops


def row_softmax_cost(rows, cols, dtype_bytes):
    """out = softmax(x, dim=-1), where x and out are (rows, cols).

    For each row: m = max(x), e = exp(x - m), out = e / sum(e). Count one FLOP per element for each
    of these five steps: the max (a comparison), the subtraction, the exp, the sum (an addition) and
    the division. Returns (bytes, flops).
    """
    n_bytes = 2 * rows * cols * dtype_bytes  # read x, write out
    n_flops = 5 * rows * cols  # max, subtract, exp, sum, divide
    return n_bytes, n_flops


def bias_gelu_cost(rows, cols, dtype_bytes):
    """out = gelu(x + bias), where x and out are (rows, cols) and bias is (cols,), added to every row.

    GELU in its tanh form, as a fused kernel computes it for each element:

        h = x + bias
        out = 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h * h * h)))

    Count one FLOP per +, * and tanh in these two lines, for each element. Returns (bytes, flops).
    """
    n_bytes = (2 * rows * cols + cols) * dtype_bytes  # read x and bias, write out
    n_flops = 10 * rows * cols  # h: 1 add; out: 6 multiplies, 2 adds, 1 tanh
    return n_bytes, n_flops


def bound(n_bytes, n_flops, bandwidth_gbs, tflops):
    """'memory' or 'compute': which limit bounds an operation on a GPU with these peaks.

    bandwidth_gbs: memory bandwidth in GB/s; tflops: arithmetic rate in TFLOP/s. The operation is
    memory-bound when moving its bytes takes at least as long as doing its FLOPs (so 'memory' on a
    tie), compute-bound otherwise.
    """
    memory_s = n_bytes / (bandwidth_gbs * 1e9)
    compute_s = n_flops / (tflops * 1e12)
    return "memory" if memory_s >= compute_s else "compute"


def floor_ms(n_bytes, n_flops, bandwidth_gbs, tflops):
    """The least time in milliseconds any implementation can take on a GPU with these peaks.

    Memory traffic and arithmetic overlap on a GPU, so the floor is the longer of the two times.
    """
    memory_s = n_bytes / (bandwidth_gbs * 2**30)
    compute_s = n_flops / (tflops * 1e12)
    return max(memory_s, compute_s) * 1e3
