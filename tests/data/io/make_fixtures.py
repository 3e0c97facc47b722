#!/usr/bin/env python3
"""Regenerates the tiny .npy and .safetensors fixtures used by tests/test_io.cpp.

    /usr/bin/python3 tests/data/io/make_fixtures.py            # rewrite the fixtures
    /usr/bin/python3 tests/data/io/make_fixtures.py --check F  # load files written by rnncore

Needs only the standard library and numpy. The .npy files come from numpy
itself. The safetensors package is not assumed to be installed, so the
.safetensors fixture is written by the small writer below, which follows the
reference implementation's layout: compact JSON header with "__metadata__"
first, tensors ordered by dtype alignment (largest first) then name, header
padded with spaces to a multiple of 8 bytes, data packed without gaps.
--check loads with the same rules the reference loader enforces (contiguous
offsets that cover the whole data section) and np.load for .npy files.
The values written here are repeated in tests/test_io.cpp; keep them in sync.
"""
import json
import os
import struct
import sys

import numpy as np
from numpy.lib import format as npformat

HERE = os.path.dirname(os.path.abspath(__file__))

DTYPES = {  # safetensors name -> (numpy dtype, alignment)
    'F64': ('<f8', 8), 'I64': ('<i8', 8), 'F32': ('<f4', 4), 'I32': ('<i4', 4),
    'F16': ('<f2', 2), 'BF16': ('<u2', 2), 'I16': ('<i2', 2),
    'I8': ('i1', 1), 'U8': ('u1', 1), 'BOOL': ('?', 1),
}


def save_npy(name, array, version=None):
    with open(os.path.join(HERE, name), 'wb') as f:
        if version is None:
            np.save(f, array, allow_pickle=False)
        else:
            npformat.write_array(f, array, version=version, allow_pickle=False)


def make_npy():
    save_npy('f32_2x3.npy', (np.arange(6, dtype='<f4') * 0.5 - 1).reshape(2, 3))
    save_npy('f64_3.npy', np.array([1.5, -2.25, 1e300], dtype='<f8'))
    save_npy('f16_4.npy', np.array([0, 1, -2.5, 65504], dtype='<f2'))
    save_npy('i8_4.npy', np.array([-128, -1, 0, 127], dtype='i1'))
    save_npy('u8_3.npy', np.array([0, 128, 255], dtype='u1'))
    save_npy('bool_3.npy', np.array([True, False, True]))
    save_npy('i16_2x2.npy', np.array([[-32768, 1], [2, 32767]], dtype='<i2'))
    save_npy('i32_3.npy', np.array([-7, 0, 2147483647], dtype='<i4'))
    save_npy('i64_2.npy', np.array([-5, 1 << 40], dtype='<i8'))
    save_npy('scalar_f32.npy', np.array(3.25, dtype='<f4'))
    save_npy('empty_0x3_f32.npy', np.zeros((0, 3), dtype='<f4'))
    save_npy('be_f32_2x2.npy', np.array([[1.0, -2.0], [0.5, 1e-3]], dtype='>f4'))
    save_npy('be_i16_3.npy', np.array([1, -2, 300], dtype='>i2'))
    save_npy('fortran_f32_2x3.npy', np.asfortranarray(np.arange(6, dtype='<f4').reshape(2, 3)))
    save_npy('v2_i32_3.npy', np.array([1, 2, 3], dtype='<i4'), version=(2, 0))
    save_npy('v3_f32_2.npy', np.array([0.25, -8], dtype='<f4'), version=(3, 0))
    save_npy('u32_2.npy', np.array([1, 2], dtype='<u4'))


def to_bf16(values):
    """Truncates float32 values that are exact in bfloat16 to their top 16 bits."""
    bits = np.array(values, dtype='<f4').view('<u4')
    assert np.all(bits & 0xFFFF == 0), 'values must be exact in bfloat16'
    return (bits >> 16).astype('<u2')


def save_safetensors(name, tensors, metadata):
    """tensors: {name: (dtype name, numpy array)}; metadata: {str: str}."""
    order = sorted(tensors, key=lambda k: (-DTYPES[tensors[k][0]][1], k))
    header = {'__metadata__': metadata} if metadata else {}
    blobs, offset = [], 0
    for key in order:
        dtype, array = tensors[key]
        raw = np.ascontiguousarray(array, dtype=DTYPES[dtype][0]).tobytes()
        header[key] = {'dtype': dtype, 'shape': list(array.shape), 'data_offsets': [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(',', ':'), ensure_ascii=False).encode('utf-8')
    text += b' ' * (-len(text) % 8)
    with open(os.path.join(HERE, name), 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))


def make_safetensors():
    save_safetensors('small.safetensors', {
        'weight': ('F32', (np.arange(6, dtype='<f4') * 0.5 - 1).reshape(2, 3)),
        'bias': ('F64', np.array([0.125, -3.0, 1e-300])),
        'half': ('F16', np.array([1.5, -0.0], dtype='<f2')),
        'brain': ('BF16', to_bf16([1.0, -2.5, 3.140625])),
        'steps': ('I64', np.array([-1, 1 << 33], dtype='<i8')),
        'ints': ('I32', np.array([[7], [-9]], dtype='<i4')),
        'mid': ('I16', np.array([-300, 300], dtype='<i2')),
        'small': ('I8', np.array([-3, 4], dtype='i1')),
        'codes': ('U8', np.array([0, 1, 254, 255], dtype='u1')),
        'mask': ('BOOL', np.array([[True, False], [False, True]])),
        'empty': ('F32', np.zeros((0, 4), dtype='<f4')),
    }, {'format': 'pt', 'note': 'tiny fixture \u2713'})


def check_safetensors(path):
    blob = open(path, 'rb').read()
    (n,) = struct.unpack('<Q', blob[:8])
    header = json.loads(blob[8:8 + n].decode('utf-8'))
    data = blob[8 + n:]
    meta = header.pop('__metadata__', {})
    assert all(isinstance(v, str) for v in meta.values()), 'metadata values must be strings'
    end = 0
    for key, entry in sorted(header.items(), key=lambda kv: kv[1]['data_offsets']):
        assert set(entry) == {'dtype', 'shape', 'data_offsets'}, key
        begin, stop = entry['data_offsets']
        assert begin == end, '%s: offsets must be contiguous' % key
        array = np.frombuffer(data[begin:stop], dtype=DTYPES[entry['dtype']][0]).reshape(entry['shape'])
        print('  %s %s %s' % (key, entry['dtype'], array.tolist()))
        end = stop
    assert end == len(data), 'data section has %d bytes, tensors cover %d' % (len(data), end)
    print('%s: OK (%d tensors, header %d bytes, metadata %r)' % (path, len(header), n, meta))


def check(paths):
    for path in paths:
        if path.endswith('.npy'):
            array = np.load(path, allow_pickle=False)
            print('%s: OK %s %s %s' % (path, array.dtype.str, array.shape, array.tolist()))
        else:
            check_safetensors(path)


if __name__ == '__main__':
    if len(sys.argv) > 1 and sys.argv[1] == '--check':
        check(sys.argv[2:])
    else:
        make_npy()
        make_safetensors()
