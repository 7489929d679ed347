"""Audio source: a PCM WAV file -> a speech model's ``input_values`` [1, samples] (float32).

Invariants:

- WAV is read with the standard library and numpy (no audio dependency): 8-bit unsigned,
  16-, 24- and 32-bit signed integer and 32-bit float PCM (WAVE_FORMAT_PCM, IEEE_FLOAT and
  their WAVE_FORMAT_EXTENSIBLE forms). Integers become floats as audio libraries read them
  (soundfile, librosa): divided by 2^(bits - 1), 8-bit centred on 128 first.
- Several channels are averaged into one (the mean a transformers user takes of a stereo file).
- The file's rate must be the model's (preprocessor_config.json's sampling_rate): nothing is
  resampled; another rate is refused with the conversion to run.
- With do_normalize, the waveform is normalised to zero mean and unit variance in float32 with
  numpy's own mean and variance, as transformers' Wav2Vec2FeatureExtractor computes it.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nneditor.inputs.spec import InputSpec, InputSpecError

#: WAV format tags read here
PCM, IEEE_FLOAT, EXTENSIBLE = 1, 3, 0xFFFE
#: Wav2Vec2FeatureExtractor's variance floor
NORM_EPS = 1e-7
#: the largest WAV file read (a 4 GiB RIFF file is WAV's own limit)
MAX_BYTES = 1 << 32


@dataclass(frozen=True)
class Processing:
    """What a speech model's feature extractor does to a waveform (preprocessor_config.json):
    the ``rate`` it expects and whether it normalises (``normalize``)."""

    rate: int
    normalize: bool


def model_processing(model: str | os.PathLike[str]) -> Processing | None:
    """The preprocessor_config.json of the snapshot at (or beside) ``model``, None without
    one that states a sampling_rate."""
    p = Path(model)
    folder = p if p.is_dir() else p.parent
    try:
        config = json.loads((folder / "preprocessor_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    rate = config.get("sampling_rate") if isinstance(config, dict) else None
    if not isinstance(rate, int) or rate <= 0:
        return None
    return Processing(rate, bool(config.get("do_normalize", True)))


def read_wav(path: str | os.PathLike[str]) -> tuple[np.ndarray, int]:
    """(the samples [frames, channels] as float32, the sample rate) of a WAV file."""
    p = Path(path)
    try:
        data = p.read_bytes() if p.stat().st_size < MAX_BYTES else b""
    except OSError as exc:
        raise InputSpecError(f"cannot read audio file {p}: {exc.strerror or exc}") from None
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise InputSpecError(
            f"{p} is not a WAV file (no RIFF/WAVE header); convert it, e.g. "
            f"`ffmpeg -i {p.name} -ac 1 out.wav`"
        )
    fmt: tuple[int, int, int, int] | None = None
    samples = None
    at = 12
    while at + 8 <= len(data):
        chunk, size = data[at : at + 4], struct.unpack_from("<I", data, at + 4)[0]
        body = data[at + 8 : at + 8 + size]
        if chunk == b"fmt " and len(body) >= 16:
            tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", body)
            if tag == EXTENSIBLE and len(body) >= 26:
                tag = struct.unpack_from("<H", body, 24)[0]  # the sub-format GUID's first bytes
            fmt = (tag, channels, rate, bits)
        elif chunk == b"data":
            samples = body
        at += 8 + size + (size & 1)
    if fmt is None or samples is None:
        raise InputSpecError(
            f"{p} has no {'fmt' if fmt is None else 'data'} chunk; it is not a playable WAV file"
        )
    tag, channels, rate, bits = fmt
    return _decoded(p, samples, tag, channels, bits), rate


def _decoded(p: Path, raw: bytes, tag: int, channels: int, bits: int) -> np.ndarray:
    if channels < 1:
        raise InputSpecError(f"{p} states {channels} channels")
    width = bits // 8
    known = (tag == PCM and bits in (8, 16, 24, 32)) or (tag == IEEE_FLOAT and bits == 32)
    if not known:
        kind = {PCM: "integer", IEEE_FLOAT: "float"}.get(tag, f"format {tag}")
        raise InputSpecError(
            f"{p} holds {bits}-bit {kind} samples; NNEditor reads 8/16/24/32-bit integer and "
            f"32-bit float PCM WAV: convert it, e.g. `ffmpeg -i {p.name} -c:a pcm_s16le out.wav`"
        )
    count = len(raw) // (width * channels)
    raw = raw[: count * width * channels]
    if tag == IEEE_FLOAT:
        x = np.frombuffer(raw, "<f4").astype(np.float32)
    elif bits == 8:
        x = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128) / np.float32(128)
    elif bits == 24:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        ints = (b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)) << 8 >> 8  # sign from bit 23
        x = (ints.astype(np.float64) / (1 << 23)).astype(np.float32)
    else:
        ints = np.frombuffer(raw, f"<i{width}")
        x = (ints.astype(np.float64) / (1 << (bits - 1))).astype(np.float32)
    return x.reshape(count, channels)


def waveform(samples: np.ndarray, normalize: bool) -> np.ndarray:
    """One channel [samples] (float32) of ``samples`` [frames, channels]: their mean, then
    Wav2Vec2FeatureExtractor's zero-mean unit-variance normalisation when ``normalize``."""
    x = samples.mean(axis=1, dtype=np.float32) if samples.shape[1] > 1 else samples[:, 0]
    x = np.ascontiguousarray(x, dtype=np.float32)
    if not normalize:
        return x
    return ((x - x.mean()) / np.sqrt(x.var() + NORM_EPS)).astype(np.float32)


def audio_for_input(
    spec: InputSpec, path: str | os.PathLike[str], processing: Processing | None
) -> np.ndarray:
    """``input_values`` [1, samples] for ``spec`` from the WAV file at ``path``, read at the
    model's rate and normalised as its feature extractor does (``processing``: the snapshot's
    preprocessor_config.json; None: 16 kHz, normalised, as facebook/wav2vec2-base-960h's)."""
    declared = spec.declared_shape
    if declared is None or len(declared) != 2 or not (spec.dtype or "").startswith("float"):
        raise InputSpecError(
            f"input {spec.name!r} is {spec.declared_text()}; --audio fills a float "
            "[batch, samples] waveform input"
        )
    samples, rate = read_wav(path)
    want = processing or Processing(16000, True)
    if rate != want.rate:
        name = Path(path).name
        raise InputSpecError(
            f"{name} is sampled at {rate} Hz but the model reads {want.rate} Hz audio "
            f"(preprocessor_config.json's sampling_rate); resample it first, e.g. `ffmpeg -i "
            f"{name} -ar {want.rate} out.wav` or `sox {name} -r {want.rate} out.wav`"
        )
    if not len(samples):
        raise InputSpecError(f"{path} holds no samples")
    x = waveform(samples, want.normalize)
    return x[None].astype(spec.numpy_dtype, copy=False)
