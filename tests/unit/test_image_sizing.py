"""An image processor's sizing (preprocessor_config.json: resize, shorter side, centre crop)
as transformers computes it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nneditor.inputs.image import Sizing, _centre_crop, model_sizing


def _config(tmp_path: Path, **config: object) -> Path:
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    return tmp_path


def test_the_stated_sizings_are_read(tmp_path: Path) -> None:
    vit = _config(tmp_path, size={"height": 224, "width": 224}, resample=2)
    assert model_sizing(vit) == Sizing(resize=(224, 224), resample=2)
    bit = _config(
        tmp_path,
        size={"shortest_edge": 256},
        resample=3,
        do_center_crop=True,
        crop_size={"height": 224, "width": 224},
    )
    assert model_sizing(bit) == Sizing(shortest=256, resample=3, crop=(224, 224))
    assert model_sizing(_config(tmp_path, size={"shortest_edge": 8}, do_resize=False)) is None
    assert model_sizing(_config(tmp_path, size={"longest_edge": 8})) is None  # not followed
    assert model_sizing(_config(tmp_path, do_center_crop=True, size=4)) is None  # no crop size
    assert model_sizing(tmp_path / "missing") is None


@pytest.mark.parametrize("shape", [(480, 640), (640, 480), (300, 300), (1000, 10), (7, 13)])
def test_shorter_side_sizes_equal_transformers(shape: tuple[int, int]) -> None:
    transforms = pytest.importorskip("transformers.image_transforms")
    image = np.zeros((*shape, 3), np.uint8)
    for shortest, longest in ((256, None), (224, 300), (5, None)):
        want = transforms.get_resize_output_image_size(
            image, shortest, default_to_square=False, max_size=longest
        )
        got = Sizing(shortest=shortest, longest=longest).resized(*shape)
        assert got == tuple(want), (shortest, longest)


@pytest.mark.parametrize("shape", [(9, 12), (12, 9), (4, 4), (3, 11), (10, 10)])
def test_centre_crops_equal_transformers(shape: tuple[int, int]) -> None:
    transforms = pytest.importorskip("transformers.image_transforms")
    rng = np.random.default_rng(1)
    image = rng.integers(0, 255, (*shape, 3), dtype=np.uint8)
    for crop in ((5, 5), (6, 7), (8, 3), (12, 12)):
        want = transforms.center_crop(image, crop, input_data_format="channels_last")
        assert np.array_equal(_centre_crop(image, crop), want), crop


#: ConvNeXt's and ResNet's releases (facebook/convnext-*-224, microsoft/resnet-*): an edge and
#: crop_pct, named by their old feature extractor's type
CONVNEXT = {
    "do_normalize": True,
    "do_resize": True,
    "feature_extractor_type": "ConvNextFeatureExtractor",
    "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225],
    "resample": 3,
}


@pytest.mark.parametrize(
    ("size", "pct", "want"),
    [
        (224, 0.875, Sizing(shortest=256, resample=3, crop=(224, 224))),
        ({"shortest_edge": 32}, 0.875, Sizing(shortest=36, resample=3, crop=(32, 32))),
        (224, None, Sizing(shortest=256, resample=3, crop=(224, 224))),  # its default pct
        (384, 0.875, Sizing(resize=(384, 384), resample=3)),  # warped, not cropped
    ],
)
def test_convnext_crop_pct_sizing_is_read(tmp_path: Path, size: object, pct, want) -> None:  # noqa: ANN001
    stated = {"crop_pct": pct} if pct else {}
    assert model_sizing(_config(tmp_path, **CONVNEXT, size=size, **stated)) == want


@pytest.mark.parametrize("size", [32, 24, 384])
def test_convnext_crop_pct_images_equal_transformers_processor(tmp_path: Path, size: int) -> None:
    """The pixels load_image makes with the sizing read are those transformers' ConvNeXt
    processor (the one microsoft/resnet-* and facebook/convnext-* load) makes."""
    tf = pytest.importorskip("transformers")
    image_pil = pytest.importorskip("PIL.Image")
    from nneditor.inputs.image import load_image

    folder = _config(tmp_path, **CONVNEXT, size=size, crop_pct=0.875)
    processor = tf.AutoImageProcessor.from_pretrained(str(folder))
    rng = np.random.default_rng(0)
    for shape in ((60, 50, 3), (41, 97, 3), (20, 20, 3), (400, 300, 3)):
        png = tmp_path / f"{shape[0]}x{shape[1]}.png"
        image_pil.fromarray((rng.random(shape) * 255).astype(np.uint8)).save(png)
        want = processor(image_pil.open(png), return_tensors="np")["pixel_values"]
        got = load_image(png, size, size, sizing=model_sizing(folder))
        assert got.shape == want.shape and np.array_equal(got, want), shape


def test_mobilenet_s_one_number_size_is_the_shorter_side(tmp_path: Path) -> None:
    """google/mobilenet_v2_1.0_224's processor states ``size: 256`` and ``crop_size: 224``:
    MobileNetV2ImageProcessor reads the 256 as the shorter side's (not a 256x256 square), as
    transformers' processor itself shows."""
    release = {
        "crop_size": 224,
        "do_center_crop": True,
        "do_normalize": True,
        "do_resize": True,
        "feature_extractor_type": "MobileNetV2FeatureExtractor",
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "resample": 2,
        "size": 256,
    }
    folder = _config(tmp_path, **release)
    assert model_sizing(folder) == Sizing(shortest=256, resample=2, crop=(224, 224))
    tf = pytest.importorskip("transformers")
    processor = tf.AutoImageProcessor.from_pretrained(str(folder))
    assert processor.size["shortest_edge"] == 256 and processor.crop_size["height"] == 224
    square = _config(tmp_path, **{**release, "feature_extractor_type": "ViTFeatureExtractor"})
    assert model_sizing(square) == Sizing(resize=(256, 256), resample=2, crop=(224, 224))


EFFICIENTNET = {  # google/efficientnet-b0's preprocessor_config.json (b7's: size 600)
    "crop_size": {"height": 289, "width": 289},
    "do_center_crop": False,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.485, 0.456, 0.406],
    "image_processor_type": "EfficientNetImageProcessor",
    "image_std": [0.47853944, 0.4732864, 0.47434163],
    "include_top": True,
    "resample": 0,
    "rescale_factor": 0.00392156862745098,
    "rescale_offset": False,
    "size": {"height": 24, "width": 24},
}


@pytest.mark.parametrize(
    "change",
    [{}, {"rescale_offset": True}, {"include_top": False}, {"do_normalize": False},
     {"resample": 3, "do_center_crop": True, "crop_size": {"height": 20, "width": 16}}],
)  # fmt: skip
def test_efficientnet_processor_equals_transformers(tmp_path: Path, change: dict) -> None:
    """EfficientNetImageProcessor's own steps (rescale, rescale_offset's minus one, the
    normalisation, include_top's second division by the std), byte-equal to transformers'."""
    from nneditor.inputs.image import load_image, stated_scaling

    tf = pytest.importorskip("transformers")
    image_pil = pytest.importorskip("PIL.Image")
    folder = _config(tmp_path, **{**EFFICIENTNET, **change})
    png = tmp_path / "image.png"
    rng = np.random.default_rng(0)
    image_pil.fromarray((rng.random((37, 29, 3)) * 255).astype(np.uint8)).save(png)
    processor = tf.AutoImageProcessor.from_pretrained(str(folder))
    want = processor(image_pil.open(png), return_tensors="np")["pixel_values"]
    sizing, scaling = model_sizing(folder), stated_scaling(folder)
    assert sizing is not None and scaling is not None
    got = load_image(png, *want.shape[2:], normalization=scaling, sizing=sizing)
    assert got.shape == want.shape and np.array_equal(got, want)
