"""Hostile: answers every cost question with an object that equals anything."""


class Anything(tuple):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False


def vector_add_cost(n, dtype_bytes):
    return Anything()


def matmul_cost(M, N, K, dtype_bytes):
    return Anything()


def row_softmax_cost(rows, cols, dtype_bytes):
    return Anything()


def bias_gelu_cost(rows, cols, dtype_bytes):
    return Anything()


def bound(n_bytes, n_flops, bandwidth_gbs, tflops):
    return Anything()


def floor_ms(n_bytes, n_flops, bandwidth_gbs, tflops):
    return Anything()
