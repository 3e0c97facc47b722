// Planted: backend comparisons outside the file that chooses the backend.
int run(const PlanImpl& p, const Plan& plan, Backend want) {
  // a comment may say p.backend == Backend::gpu without being flagged
  int n = 0;
  Backend b = want;
  if (p.backend == Backend::simd) n += 1;
  if (plan.backend() != Backend::gpu) n += 2;
  if (Backend::reference == want) n += 4;
  b = Backend::gpu;
  return n + static_cast<int>(b);
}
