#!/usr/bin/env python3
"""Self-test of scripts/gpu_resource_report.py's parsing and gate on canned compiler logs (stdlib only,
no GPU compiler needed). Run: python3 scripts/test_gpu_resource_report.py (meson test gpu_resource_gate)."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_resource_report as g  # noqa: E402

NVCC_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_ZN7rnncore3gpu14rnncore_kernelINS0_23f32_rnn_proj_gemm_tiledINS0_9WeightF16EEEEEvNT_4ArgsEi' for 'sm_90'
ptxas info    : Function properties for _ZN7rnncore3gpu14rnncore_kernelINS0_23f32_rnn_proj_gemm_tiledINS0_9WeightF16EEEEEvNT_4ArgsEi
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 64 registers, used 1 barriers, 8 bytes cumulative stack size, 2372 bytes cmem[0]
ptxas info    : Compile time = 114.716 ms
ptxas info    : Compiling entry function '_ZN7rnncore3gpu14rnncore_kernelINS0_18f32_rnn_state_initEEEvNT_4ArgsEi' for 'sm_90'
ptxas info    : Function properties for _ZN7rnncore3gpu14rnncore_kernelINS0_18f32_rnn_state_initEEEvNT_4ArgsEi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 28 registers, 1024 bytes smem, 2372 bytes cmem[0]
"""

HIP_LOG = """\
../src/gpu/device/global.hpp:71:1: remark: Function Name: _ZN7rnncore3gpu14rnncore_kernelINS0_29f32_rnn_recurrence_persistentILi0ELi32EfEEEEvPKNT_4ArgsEi [-Rpass-analysis=kernel-resource-usage]
__global__ void __launch_bounds__(K::kMaxThreads) rnncore_kernel(const typename K::Args* __restrict__ args, int arg) {
^
../src/gpu/device/global.hpp:71:1: remark:     SGPRs: 104 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     VGPRs: 84 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     ScratchSize [bytes/lane]: 144 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     Occupancy [waves/SIMD]: 5 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     SGPRs Spill: 56 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     VGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     LDS Size [bytes/block]: 0 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark: Function Name: _ZN7rnncore3gpu14rnncore_kernelINS0_18f32_rnn_state_initEEEvPKNT_4ArgsEi [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     SGPRs: 20 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     VGPRs: 17 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     ScratchSize [bytes/lane]: 0 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     Occupancy [waves/SIMD]: 8 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     SGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     VGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]
../src/gpu/device/global.hpp:71:1: remark:     LDS Size [bytes/block]: 512 [-Rpass-analysis=kernel-resource-usage]
"""

failures = 0


def expect(cond, what):
    global failures
    if not cond:
        failures += 1
        print('FAIL:', what)


def run_check(kernels, allowance_text, targets):
    with tempfile.NamedTemporaryFile('w', suffix='.txt', delete=False) as f:
        f.write(allowance_text)
    try:
        return g.check(kernels, g.load_allowances(f.name), targets)
    finally:
        os.unlink(f.name)


def main():
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, 'nvcc.log'), 'w').write(NVCC_LOG)
        open(os.path.join(d, 'hipcc-gfx90a.log'), 'w').write(HIP_LOG)
        kernels = g.parse(d)
    gemm = kernels['sm_90']['_ZN7rnncore3gpu14rnncore_kernelINS0_23f32_rnn_proj_gemm_tiledINS0_9WeightF16EEEEEvNT_4ArgsEi']
    expect(gemm == {'scratch': 8, 'spill': 12, 'smem': 0, 'regs': 64}, f'nvcc fields {gemm}')
    init = kernels['sm_90']['_ZN7rnncore3gpu14rnncore_kernelINS0_18f32_rnn_state_initEEEvNT_4ArgsEi']
    expect(init['smem'] == 1024 and init['regs'] == 28 and g.bytes_used(init) == 0, f'nvcc smem {init}')
    pers = kernels['gfx90a']['_ZN7rnncore3gpu14rnncore_kernelINS0_29f32_rnn_recurrence_persistentILi0ELi32EfEEEEvPKNT_4ArgsEi']
    expect(pers['scratch'] == 144 and pers['regs'] == 84 and pers['occ'] == 5 and pers['sgpr_spill'] == 56,
           f'hipcc fields {pers}')
    expect(g.bytes_used(pers) == 144 and g.bytes_used(gemm) == 12, 'bytes: scratch / largest spill')
    expect(len(kernels['gfx90a']) == 2 and len(kernels['sm_90']) == 2, 'kernel counts')

    import shutil
    if shutil.which('c++filt'):
        names = g.short_names(list(kernels['gfx90a']) + list(kernels['sm_90']))
        expect(names[next(iter(kernels['gfx90a']))] == 'f32_rnn_recurrence_persistent<0,32,float>',
               f'short name {names}')
        gemm_pat, pers_pat = 'f32_rnn_proj_gemm_tiled<WeightF16>', 'f32_rnn_recurrence_persistent<*,32,*>'
    else:  # no demangler: allowances match mangled names
        gemm_pat, pers_pat = '*proj_gemm_tiledINS0_9WeightF16*', '*persistentILi0ELi32E*'

    targets = ('sm_90', 'gfx90a')
    # Nothing allowed: both targets fail, each offender named with its bytes.
    lines, failed = run_check(kernels, '', targets)
    text = '\n'.join(lines)
    expect(failed, 'no allowances: fails')
    expect('CHECK sm_90 FAILED' in text and 'CHECK gfx90a FAILED' in text, text)
    expect('12 bytes' in text and '144 bytes' in text, f'offenders named: {text}')
    # Both allowed: passes.
    ok = f'sm_* {gemm_pat} 12 reason one\ngfx90a {pers_pat} 272 reason two  # comment\n'
    lines, failed = run_check(kernels, ok, targets)
    expect(not failed and 'CHECK sm_90 ok' in lines[0] and 'CHECK gfx90a ok' in lines[1], '\n'.join(lines))
    # Allowance too small: fails naming the limit.
    lines, failed = run_check(kernels, f'sm_90 {gemm_pat} 8 too small\ngfx90a {pers_pat} 272 r\n', targets)
    expect(failed and any('(allowed 8)' in l for l in lines), '\n'.join(lines))
    # Stale allowance (matches a kernel that needs nothing): fails.
    lines, failed = run_check(kernels, ok + 'gfx90a *state_init* 16 stale\n', targets)
    expect(failed and any('stale allowance' in l for l in lines) and 'CHECK gfx90a FAILED' in lines[1], '\n'.join(lines))
    # An allowance for a target not compiled is not stale; a target without a report fails.
    lines, failed = run_check(kernels, ok + 'gfx1030 * 16 other target\n', targets)
    expect(not failed, '\n'.join(lines))
    lines, failed = run_check(kernels, ok, targets + ('sm_80',))
    expect(failed and 'CHECK sm_80 FAILED: no report' in lines[2], '\n'.join(lines))
    # Malformed line.
    try:
        run_check(kernels, 'sm_90 only-two\n', targets)
        expect(False, 'malformed allowance accepted')
    except ValueError:
        pass
    # The doc check: a page written by --markdown from these logs passes; one missing a kernel, or
    # listing one no longer compiled, fails naming it.
    with tempfile.TemporaryDirectory() as d:
        page = os.path.join(d, 'page.md')
        g.markdown(kernels, targets, page, 'test', d)
        line, stale = g.doc_check(kernels, targets, page)
        expect(not stale and 'CHECK doc ok' in line and 'the 3 kernel' in line, line)
        text = open(page).read()
        rows = [l for l in text.splitlines() if l.startswith('| `')]
        open(page, 'w').write(text.replace(rows[0] + '\n', '') + '| `f32_gone` | 1 | 1 |\n')
        line, stale = g.doc_check(kernels, targets, page)
        gone = rows[0].split('`')[1]
        expect(stale and 'CHECK doc FAILED' in line and gone in line and 'f32_gone' in line, line)
        line, stale = g.doc_check(kernels, targets, os.path.join(d, 'missing.md'))
        expect(stale and 'CHECK doc FAILED' in line, line)

    # A combined log of two AMD targets (the report's earlier form) is split by occupancy.
    two = HIP_LOG + HIP_LOG.replace('Occupancy [waves/SIMD]: 8', 'Occupancy [waves/SIMD]: 16')
    split = g.parse_hipcc(two)
    expect(sorted(split) == ['gfx1030', 'gfx90a'], f'split {sorted(split)}')

    print('gpu_resource_report self-test:', 'FAILED' if failures else 'ok')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
