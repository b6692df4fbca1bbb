#pragma once
// The Fortran BLAS routines that LibTorch itself links (OpenBLAS here), for the few places
// that call them directly: column-major, arguments by pointer.

extern "C" {
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
            const float* beta, float* c, const int* ldc);
void sgemv_(const char* trans, const int* m, const int* n, const float* alpha, const float* a,
            const int* lda, const float* x, const int* incx, const float* beta, float* y,
            const int* incy);
}

namespace tinylm {
// Up to this many rows a product with a weight matrix runs as matrix-vector products:
// sgemm copies ("packs") the whole weight on every call, which at one row costs several
// times the product itself; from two rows on one sgemm was as fast as a loop of sgemv
// (docs/MEASUREMENTS.md).
inline constexpr long kMaxMatrixVectorRows = 1;
}  // namespace tinylm
