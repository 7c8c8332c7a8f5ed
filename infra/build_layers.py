"""`make build`: the dependencies layer, as Linux arm64 wheels for Python 3.13, without Docker.

The runtime dependencies come from pyproject.toml, less boto3 and botocore, which the Lambda runtime
provides. pip resolves for the Lambda platform (``--platform manylinux2014_aarch64 --only-binary=:all:``),
so the result is the same on any machine that builds it.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from infra.app import DEPENDENCIES_LAYER_DIR
from infra.functions import REPO_ROOT

PLATFORM = "manylinux2014_aarch64"
PYTHON_VERSION = "3.13"
PROVIDED_BY_RUNTIME = frozenset({"boto3", "botocore"})


def runtime_requirements(pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    dependencies: list[str] = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return [
        requirement
        for requirement in dependencies
        if re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0].lower() not in PROVIDED_BY_RUNTIME
    ]


def pip_command(target: Path, requirements: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--platform",
        PLATFORM,
        "--implementation",
        "cp",
        "--python-version",
        PYTHON_VERSION,
        "--only-binary=:all:",
        "--target",
        str(target),
        *requirements,
    ]


class WrongPlatform(RuntimeError):
    """A distribution in the layer would not load on Lambda's arm64 Python 3.13."""


def wheel_tags(layer_python: Path) -> dict[str, list[str]]:
    """Each installed distribution's wheel tags, from its ``.dist-info/WHEEL`` file."""
    return {
        wheel.parent.name: [
            line.split(":", 1)[1].strip()
            for line in wheel.read_text().splitlines()
            if line.startswith("Tag:")
        ]
        for wheel in sorted(layer_python.glob("*.dist-info/WHEEL"))
    }


def loads_on_lambda(tag: str) -> bool:
    """Pure-Python wheels load anywhere; binary ones must be CPython 3.13 (or the stable ABI) on aarch64."""
    python, abi, platform = tag.split("-")
    if platform == "any":
        return python.startswith("py3") or python == "cp313"
    return (
        python.startswith("cp3")
        and abi in {"cp313", "abi3"}
        and platform.startswith("manylinux")
        and platform.endswith("aarch64")
    )


def check_layer(layer_python: Path) -> dict[str, list[str]]:
    tags = wheel_tags(layer_python)
    if not tags:
        raise WrongPlatform(f"{layer_python} holds no distributions")
    wrong = {name: found for name, found in tags.items() if not any(loads_on_lambda(tag) for tag in found)}
    if wrong:
        raise WrongPlatform(f"not for Lambda arm64 Python {PYTHON_VERSION}: {wrong}")
    return tags


def build(layer_dir: Path = DEPENDENCIES_LAYER_DIR) -> Path:
    shutil.rmtree(layer_dir, ignore_errors=True)
    target = layer_dir / "python"
    target.mkdir(parents=True)
    subprocess.run(pip_command(target, runtime_requirements()), check=True)  # noqa: S603 - fixed arguments
    # The runtime ships its own boto3; a copy pulled in by a dependency would only shadow it.
    for provided in PROVIDED_BY_RUNTIME:
        for path in target.glob(f"{provided}*"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    check_layer(target)
    return layer_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DEPENDENCIES_LAYER_DIR, help="layer directory to write")
    args = parser.parse_args(argv)
    layer = build(args.out)
    tags = check_layer(layer / "python")
    print(f"built {layer}: {len(tags)} distributions, each for {PLATFORM} Python {PYTHON_VERSION} or pure")
    for name, found in tags.items():
        print(f"  {name}: {', '.join(found)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
