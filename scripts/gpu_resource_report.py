#!/usr/bin/env python3
"""Resource report of the GPU kernels (src/gpu/gpu_backend.hip) per target, from the compilers.

Compiles the backend's translation unit with nvcc for sm_80 and sm_90 (--resource-usage) and with
hipcc for gfx90a and gfx1030 (-Rpass-analysis=kernel-resource-usage), whichever compilers are
found, keeps the compilers' logs in DIR, and prints one Markdown row per target: kernel instances,
those with scratch / local memory and how much, those with spills, registers (VGPRs on AMD), the
largest LSTM step or persistent instance, and AMD's lowest occupancy. docs/gpu.md has the table.

usage: scripts/gpu_resource_report.py DIR            compile (from the repository root) and report
       scripts/gpu_resource_report.py --logs DIR     report from DIR/nvcc.log and DIR/hipcc.log
       add --kernels to list every kernel instance
"""
import collections
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = 'src/gpu/gpu_backend.hip'


def compile_logs(out):
    os.makedirs(out, exist_ok=True)
    nvcc = shutil.which('nvcc') or ('/usr/local/cuda/bin/nvcc' if os.path.exists('/usr/local/cuda/bin/nvcc') else None)
    common = ['-std=c++17', '-O3', '-I.', '-Iinclude', '-c', SRC]
    if nvcc:
        cmd = [nvcc, '-x', 'cu', '-gencode', 'arch=compute_80,code=sm_80', '-gencode', 'arch=compute_90,code=sm_90',
               '-Xcompiler', '-fPIC,-fno-exceptions,-fno-rtti', '--resource-usage', '-o', os.path.join(out, 'nvcc.o')] + common
        with open(os.path.join(out, 'nvcc.log'), 'w') as f:
            subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    hipcc = shutil.which('hipcc')
    if hipcc:
        cmd = [hipcc, '--offload-arch=gfx90a', '--offload-arch=gfx1030', '-fPIC', '-fno-exceptions', '-fno-rtti',
               '-Rpass-analysis=kernel-resource-usage', '-o', os.path.join(out, 'hipcc.o')] + common
        with open(os.path.join(out, 'hipcc.log'), 'w') as f:
            subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)


def parse(logs):
    kernels = collections.defaultdict(dict)  # target -> mangled name -> fields
    path = os.path.join(logs, 'nvcc.log')
    if os.path.exists(path):
        cur = None
        for line in open(path, errors='replace'):
            m = re.search(r"Compiling entry function '(\S+)' for '(sm_\d+)'", line)
            if m:
                cur = kernels[m.group(2)].setdefault(m.group(1), {'scratch': 0, 'spill': 0})
                continue
            m = re.search(r'(\d+) bytes stack frame, (\d+) bytes spill stores', line)
            if m and cur is not None:
                cur['scratch'], cur['spill'] = int(m.group(1)), int(m.group(2))
            m = re.search(r'Used (\d+) registers', line)
            if m and cur is not None:
                cur['regs'] = int(m.group(1))
    path = os.path.join(logs, 'hipcc.log')
    if os.path.exists(path):
        # One block of remarks per kernel, all kernels of one target, then the next target's.
        groups, seen, cur = [[]], set(), None
        fields = (('VGPRs Spill', 'spill'), ('VGPRs', 'regs'), (r'ScratchSize \[bytes/lane\]', 'scratch'),
                  (r'Occupancy \[waves/SIMD\]', 'occ'))
        for line in open(path, errors='replace'):
            m = re.search(r'remark: Function Name: (\S+)', line)
            if m:
                if m.group(1) in seen:
                    groups.append([])
                    seen = set()
                seen.add(m.group(1))
                cur = {'name': m.group(1), 'scratch': 0, 'spill': 0}
                groups[-1].append(cur)
                continue
            for key, field in fields:
                m = re.search(r'remark:\s+' + key + r': (\d+)', line)
                if m and cur is not None:
                    cur[field] = int(m.group(1))
                    break
        for g in groups:
            if g:  # wave32 RDNA (gfx1030) reaches more than 8 waves per SIMD; CDNA (gfx90a) at most 8
                target = 'gfx1030' if max(k.get('occ', 0) for k in g) > 8 else 'gfx90a'
                for k in g:
                    kernels[target][k['name']] = k
    return kernels


def span(values):
    nz = [v for v in values if v]
    return f'{min(nz)}–{max(nz)}' if nz else '0'


def report(kernels, list_kernels):
    print('| target | kernels | with scratch | scratch bytes/lane | with spills | spill bytes | registers | LSTM (max registers) | occupancy (min) |')
    print('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
    for t in ('sm_80', 'sm_90', 'gfx90a', 'gfx1030'):
        ks = kernels.get(t)
        if not ks:
            print(f'| {t} | no report | | | | | | | |')
            continue
        regs = [k.get('regs', 0) for k in ks.values()]
        scratch = [k['scratch'] for k in ks.values()]
        spill = [k['spill'] for k in ks.values()]
        lstm = [k.get('regs', 0) for n, k in ks.items() if re.search(r'(step_tiled|recurrence_persistent)ILi0E', n)]
        occ = [k['occ'] for k in ks.values() if 'occ' in k]
        print(f'| {t} | {len(ks)} | {sum(1 for v in scratch if v)} | {span(scratch)} | {sum(1 for v in spill if v)} | '
              f'{span(spill)} | {min(regs)}–{max(regs)} | {max(lstm) if lstm else "-"} | {min(occ) if occ else "-"} |')
    if list_kernels:
        for t in sorted(kernels):
            for n, k in sorted(kernels[t].items()):
                print(t, n, {f: v for f, v in k.items() if f != 'name'})


def main(argv):
    list_kernels = '--kernels' in argv
    argv = [a for a in argv if a != '--kernels']
    if len(argv) == 2 and argv[0] == '--logs':
        logs = argv[1]
    elif len(argv) == 1:
        logs = argv[0]
        compile_logs(logs)
    else:
        sys.exit(__doc__)
    report(parse(logs), list_kernels)


if __name__ == '__main__':
    main(sys.argv[1:])
