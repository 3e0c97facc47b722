#!/usr/bin/env python3
"""Resource report and CI gate of the GPU kernels (src/gpu/gpu_backend.hip) per target, from the compilers.

Compiles the device code of the backend's translation unit with nvcc for sm_80 and sm_90
(-fatbin --resource-usage: no host pass) and with hipcc for gfx90a and gfx1030
(--cuda-device-only -Rpass-analysis=kernel-resource-usage, one run per target), whichever compilers
are found, keeps the compilers' logs in DIR, and prints one Markdown row per target: kernel
instances, those with scratch / local memory and how much, those with spills, registers (VGPRs on
AMD), the largest LSTM step or persistent instance, and AMD's lowest occupancy. docs/gpu.md has the
table.

usage: scripts/gpu_resource_report.py [options] DIR          compile (from the repository root) and report
       scripts/gpu_resource_report.py [options] --logs DIR   report from the logs in DIR
options:
  --kernels              list every kernel instance
  --check ALLOWANCES     the gate: exit 1 when a kernel instance has local memory / spills (NVIDIA)
                         or scratch (AMD) beyond ALLOWANCES (scripts/gpu_resource_allowances.txt),
                         when an allowance matches nothing that needs it (stale), or when a target
                         has no report; prints one line "CHECK <target> ok|FAILED ..." per target
  --targets T1,T2,...    the targets to compile and check (default sm_80,sm_90,gfx90a,gfx1030)
  --markdown FILE        write the per-kernel table (docs/gpu_resources.md)
  --doc FILE             with --check: also fail ("CHECK doc FAILED") when FILE, a table written by
                         --markdown, lists other kernel instances than the compilers reported (a kernel
                         added or removed without regenerating the page); registers are not compared

Allowance file: one allowance a line, "TARGET KERNEL MAX_BYTES REASON...", where TARGET and KERNEL
are shell-style patterns (fnmatch) over the target (sm_90, gfx*) and the kernel's short name as
--kernels prints it (f32_rnn_recurrence_persistent<0,32,float>, no spaces), and MAX_BYTES bounds
the instance's bytes per thread / lane (NVIDIA: the largest of stack frame, spill stores and spill
loads; AMD: ScratchSize). '#' starts a comment.
"""
import collections
import fnmatch
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = 'src/gpu/gpu_backend.hip'
TARGETS = ('sm_80', 'sm_90', 'gfx90a', 'gfx1030')


def find_nvcc():
    return shutil.which('nvcc') or ('/usr/local/cuda/bin/nvcc' if os.path.exists('/usr/local/cuda/bin/nvcc') else None)


def compile_logs(out, targets=TARGETS):
    """Device-only compiles (the gate needs no host object): nvcc once for its targets, hipcc once per target."""
    os.makedirs(out, exist_ok=True)
    common = ['-std=c++17', '-O3', '-I.', '-Iinclude']
    nv = [t for t in targets if t.startswith('sm_')]
    nvcc = find_nvcc()
    if nvcc and nv:
        cmd = [nvcc, '-x', 'cu', '-fatbin', '--resource-usage', '-o', os.path.join(out, 'nvcc.fatbin')] + common
        for t in nv:
            cmd += ['-gencode', f'arch=compute_{t[3:]},code={t}']
        with open(os.path.join(out, 'nvcc.log'), 'w') as f:
            subprocess.run(cmd + [SRC], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    hipcc = shutil.which('hipcc')
    for t in targets:
        if t.startswith('gfx') and hipcc:
            cmd = [hipcc, f'--offload-arch={t}', '--cuda-device-only', '-fno-exceptions', '-fno-rtti',
                   '-Rpass-analysis=kernel-resource-usage', '-c', '-o', os.path.join(out, f'hipcc-{t}.o')] + common
            with open(os.path.join(out, f'hipcc-{t}.log'), 'w') as f:
                subprocess.run(cmd + [SRC], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)


def parse_nvcc(text, kernels):
    """ptxas --resource-usage: entry, properties (stack frame, spills), registers and static shared memory."""
    cur = None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\S+)' for '(sm_\d+)'", line)
        if m:
            cur = kernels[m.group(2)].setdefault(m.group(1), {'scratch': 0, 'spill': 0, 'smem': 0})
            continue
        if cur is None:
            continue
        m = re.search(r'(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads', line)
        if m:
            cur['scratch'] = int(m.group(1))
            cur['spill'] = max(int(m.group(2)), int(m.group(3)))
        m = re.search(r'Used (\d+) registers', line)
        if m:
            cur['regs'] = int(m.group(1))
            m = re.search(r'(\d+) bytes smem', line)
            cur['smem'] = int(m.group(1)) if m else 0


AMD_FIELDS = (('SGPRs Spill', 'sgpr_spill'), ('VGPRs Spill', 'spill'), ('SGPRs', 'sgprs'), ('VGPRs', 'regs'),
              (r'ScratchSize \[bytes/lane\]', 'scratch'), (r'Occupancy \[waves/SIMD\]', 'occ'),
              (r'LDS Size \[bytes/block\]', 'smem'))


def parse_hipcc(text, target=None):
    """-Rpass-analysis=kernel-resource-usage remarks. One block per kernel; with several targets in one
    log (older reports), one target's kernels follow the other's, told apart by occupancy."""
    groups, seen, cur = [[]], set(), None
    for line in text.splitlines():
        m = re.search(r'remark: Function Name: (\S+)', line)
        if m:
            if m.group(1) in seen:
                groups.append([])
                seen = set()
            seen.add(m.group(1))
            cur = {'name': m.group(1), 'scratch': 0, 'spill': 0, 'smem': 0}
            groups[-1].append(cur)
            continue
        for key, field in AMD_FIELDS:
            m = re.search(r'remark:\s+' + key + r': (\d+)', line)
            if m and cur is not None:
                cur[field] = int(m.group(1))
                break
    out = {}
    for g in groups:
        if not g:
            continue
        # wave32 RDNA (gfx1030) reaches more than 8 waves per SIMD; CDNA (gfx90a) at most 8
        t = target or ('gfx1030' if max(k.get('occ', 0) for k in g) > 8 else 'gfx90a')
        for k in g:
            out.setdefault(t, {})[k.pop('name')] = k
    return out


def parse(logs):
    kernels = collections.defaultdict(dict)  # target -> mangled name -> fields
    path = os.path.join(logs, 'nvcc.log')
    if os.path.exists(path):
        parse_nvcc(open(path, errors='replace').read(), kernels)
    for t in TARGETS:
        path = os.path.join(logs, f'hipcc-{t}.log')
        if t.startswith('gfx') and os.path.exists(path):
            kernels[t].update(parse_hipcc(open(path, errors='replace').read(), t).get(t, {}))
    path = os.path.join(logs, 'hipcc.log')  # one log of several targets (the report's earlier form)
    if os.path.exists(path):
        for t, ks in parse_hipcc(open(path, errors='replace').read()).items():
            kernels[t].update(ks)
    return kernels


def short_names(mangled):
    """Mangled kernel → 'f32_rnn_recurrence_persistent<0,32,float>' (c++filt, then the wrapper and
    namespaces dropped; the mangled name itself where c++filt is missing)."""
    names = sorted(set(mangled))
    out = {n: n for n in names}
    filt = shutil.which('c++filt')
    if not filt or not names:
        return out
    res = subprocess.run([filt], input='\n'.join(names) + '\n', capture_output=True, text=True)
    for n, d in zip(names, res.stdout.splitlines()):
        d = d.replace('rnncore::gpu::', '').replace(' ', '')
        m = re.match(r'(?:void)?rnncore_kernel<(.*)>\(.*\)$', d)
        if m:
            d = m.group(1)
        out[n] = d
    return out


def bytes_used(k):
    """Per-thread (NVIDIA) / per-lane (AMD) memory outside registers: stack frame or scratch, or spills.
    (AMD's SGPR spills go to VGPR lanes, not memory: where they reach memory, ScratchSize counts them.)"""
    return max(k.get('scratch', 0), k.get('spill', 0))


def load_allowances(path):
    """[(target pattern, kernel pattern, max bytes, reason, line number)]; ValueError on a malformed line."""
    out = []
    for no, line in enumerate(open(path), 1):
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 3)
        if len(parts) < 4 or not parts[2].isdigit():
            raise ValueError(f'{path}:{no}: expected "TARGET KERNEL MAX_BYTES REASON", got {line!r}')
        out.append((parts[0], parts[1], int(parts[2]), parts[3], no))
    return out


def check(kernels, allowances, targets):
    """The gate. Returns (lines, failed): one line per target, then one per problem."""
    names = short_names([n for t in targets for n in kernels.get(t, {})])
    lines, problems, failed = [], [], False
    used = [False] * len(allowances)
    for t in targets:
        ks = kernels.get(t)
        if not ks:
            lines.append(f'CHECK {t} FAILED: no report (compiler missing or the compile failed)')
            failed = True
            continue
        bad, allowed = [], 0
        for n, k in sorted(ks.items(), key=lambda kv: names.get(kv[0], kv[0])):
            b = bytes_used(k)
            if b == 0:
                continue
            short = names.get(n, n)
            match = [i for i, a in enumerate(allowances) if fnmatch.fnmatchcase(t, a[0]) and fnmatch.fnmatchcase(short, a[1])]
            for i in match:
                used[i] = True
            if any(b <= allowances[i][2] for i in match):
                allowed += 1
                continue
            limit = f' (allowed {max(allowances[i][2] for i in match)})' if match else ''
            bad.append(f'  {t} {short}: {b} bytes{limit}: scratch {k.get("scratch", 0)}, spills {k.get("spill", 0)}, '
                       f'registers {k.get("regs", "?")}')
        stale = [a for i, a in enumerate(allowances) if not used[i] and fnmatch.fnmatchcase(t, a[0])
                 and not any(fnmatch.fnmatchcase(names.get(n, n), a[1]) and bytes_used(k) > 0 for n, k in ks.items())]
        status = 'ok' if not bad and not stale else 'FAILED'
        failed |= status != 'ok'
        lines.append(f'CHECK {t} {status}: {len(ks)} kernels, {sum(1 for k in ks.values() if bytes_used(k))} with '
                     f'scratch / local memory ({allowed} allowed), {len(bad)} over their allowance, '
                     f'{len(stale)} stale allowances')
        problems += bad
        problems += [f'  {t}: stale allowance (line {a[4]}: {a[0]} {a[1]} {a[2]}): no kernel instance needs it'
                     for a in stale]
    return lines + problems, failed


def span(values):
    nz = [v for v in values if v]
    return f'{min(nz)}–{max(nz)}' if nz else '0'


def report(kernels, list_kernels, targets=TARGETS):
    print('| target | kernels | with scratch | scratch bytes/lane | with spills | spill bytes | registers | LSTM (max registers) | occupancy (min) |')
    print('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
    for t in targets:
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
        names = short_names([n for t in kernels for n in kernels[t]])
        for t in sorted(kernels):
            for n, k in sorted(kernels[t].items(), key=lambda kv: names[kv[0]]):
                print(t, names[n], {f: v for f, v in k.items() if f != 'name'})


def toolchains(logs):
    """The compilers' versions, where the logs or the compilers found say."""
    out = []
    nvcc = find_nvcc()
    if nvcc:
        r = subprocess.run([nvcc, '--version'], capture_output=True, text=True)
        m = re.search(r'release (\S+),', r.stdout)
        if m:
            out.append(f'CUDA {m.group(1)}')
    hipcc = shutil.which('hipcc')
    if hipcc:
        r = subprocess.run([hipcc, '--version'], capture_output=True, text=True)
        m = re.search(r'HIP version: (\S+)', r.stdout)
        if m:
            out.append(f'HIP {m.group(1)}')
    return ', '.join(out) or 'unknown'


def markdown(kernels, targets, path, command, logs):
    names = short_names([n for t in targets for n in kernels.get(t, {})])
    rows = sorted({names[n] for t in targets for n in kernels.get(t, {})})
    by_short = {t: {names[n]: k for n, k in kernels.get(t, {}).items()} for t in targets}
    cell = {}
    for t in targets:
        for s, k in by_short[t].items():
            v = f'{k.get("regs", "?")}'
            if t.startswith('gfx'):
                v += f' / {k.get("occ", "?")}'
            if k.get('smem'):
                v += f' / {k["smem"]} B smem'
            if bytes_used(k):
                v += f' / **{bytes_used(k)} B {"scratch" if t.startswith("gfx") else "local"}**'
            cell[t, s] = v
    with open(path, 'w') as f:
        f.write('# GPU kernel resources\n\n'
                '<!-- generated by scripts/gpu_resource_report.py --markdown; do not edit -->\n\n'
                f'Generated by `{command}` from the compilers\' reports of the device code of '
                '`src/gpu/gpu_backend.hip` (nvcc `--resource-usage`, hipcc `-Rpass-analysis=kernel-resource-usage`). '
                'Per kernel instance and target: registers per thread (VGPRs on AMD), then on AMD the occupancy in '
                'waves per SIMD that the registers allow (gfx90a: wave64, at most 8; gfx1030: wave32, at most 16). '
                'Static shared memory is shown only where a kernel has some: every kernel takes its shared memory '
                'dynamically, sized per plan (the persistent kernel: R slice + staged h + dot products, '
                '`persistent_smem_bytes`; the step tiles and the GEMM: fixed by the tile shape), so it is not in the '
                'compilers\' reports and the occupancy above is the registers\' bound. Local memory (NVIDIA) or '
                'scratch (AMD), per thread / lane, is shown in bold; the CI gate (`--check`) fails on any that '
                '`scripts/gpu_resource_allowances.txt` does not allow. Compilers: ' + toolchains(logs) + '.\n\n'
                'Cells: NVIDIA `registers`; AMD `VGPRs / waves per SIMD`.\n\n')
        f.write('| kernel | ' + ' | '.join(targets) + ' |\n')
        f.write('| --- |' + ' --- |' * len(targets) + '\n')
        for s in rows:
            f.write(f'| `{s}` | ' + ' | '.join(cell.get((t, s), '-') for t in targets) + ' |\n')


def doc_check(kernels, targets, path):
    """One line: whether the table at path lists exactly the instances compiled for targets."""
    names = short_names([n for t in targets for n in kernels.get(t, {})])
    compiled = {names[n] for t in targets for n in kernels.get(t, {})}
    try:
        listed = set(re.findall(r'^\| `([^`]+)` \|', open(path).read(), re.M))
    except OSError as e:
        return f'CHECK doc FAILED: {e}', True
    missing, extra = sorted(compiled - listed), sorted(listed - compiled)
    if not missing and not extra:
        return f'CHECK doc ok: {path} lists the {len(compiled)} kernel instances compiled', False
    return (f'CHECK doc FAILED: {path} is stale: not listed {missing[:8]}{" ..." if len(missing) > 8 else ""} '
            f'({len(missing)}), listed but not compiled {extra[:8]} ({len(extra)}); regenerate it with '
            f'scripts/gpu_resource_report.py --markdown {path} DIR'), True


def main(argv):
    opts = {'--check': None, '--targets': ','.join(TARGETS), '--markdown': None, '--logs': None, '--doc': None}
    list_kernels, rest, i = False, [], 0
    while i < len(argv):
        a = argv[i]
        if a == '--kernels':
            list_kernels = True
        elif a in opts and i + 1 < len(argv):
            opts[a] = argv[i + 1]
            i += 1
        elif a.startswith('-'):
            sys.exit(__doc__)
        else:
            rest.append(a)
        i += 1
    targets = tuple(t for t in opts['--targets'].split(',') if t)
    if opts['--logs'] and not rest:
        logs = opts['--logs']
    elif len(rest) == 1 and not opts['--logs']:
        logs = rest[0]
        compile_logs(logs, targets)
    else:
        sys.exit(__doc__)
    kernels = parse(logs)
    report(kernels, list_kernels, targets)
    if opts['--markdown']:
        markdown(kernels, targets, opts['--markdown'], 'scripts/gpu_resource_report.py --markdown docs/gpu_resources.md DIR', logs)
    if opts['--check']:
        try:
            allowances = load_allowances(opts['--check'])
        except (OSError, ValueError) as e:
            print(f'CHECK allowances FAILED: {e}')
            return 1
        lines, failed = check(kernels, allowances, targets)
        if opts['--doc']:
            line, stale = doc_check(kernels, targets, opts['--doc'])
            lines.insert(len(targets), line)
            failed |= stale
        print('\n'.join(lines))
        return 1 if failed else 0
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
