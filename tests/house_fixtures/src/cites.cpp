// Planted faults for scripts/check_house.py --self-test: citations.
// A missing section (docs/design.md §3), a missing subsection (docs/design.md §2.2),
// a list with one missing (docs/design.md §4, §5), and the old form (DESIGN §2).
int cites() { return 0; }
