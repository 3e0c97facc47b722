// The file that chooses the backend may compare it (not flagged).
void choose(Backend want, PlanImpl* p) {
  if (want == Backend::gpu) p->ops = &kGpuBackend;
}
