"""Build the docker sandbox image locally, from Debian packages, without pulling from a registry.

Sandboxes must work on machines that reach no registry, so the image is a ``debootstrap``
minbase rootfs with ``python3`` (the whole standard library: a correct answer that imports
``statistics`` or ``fractions`` must not fail for want of it), imported with ``docker import``. It gets a ``/work``
directory owned by ``nobody`` (the user sandboxed code runs as) and nothing else of note.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from workbench.errors import UsageError

DEFAULT_IMAGE = "nel-sandbox:bookworm"
MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
PACKAGES = ("python3",)
VERSION = f"{SUITE}-python3-1"
"""Stamped on the image: an image built by an older recipe is rebuilt, not trusted."""
SANDBOX_UID = 65534
"""``nobody`` in Debian: sandboxed code runs as this user."""
WORKDIR = "/work"
IMAGE_LABEL = "nel.sandbox.image"

_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    "ENV PYTHONDONTWRITEBYTECODE=1",
    f"WORKDIR {WORKDIR}",
    f"LABEL {IMAGE_LABEL}={VERSION}",
    'CMD ["/bin/sh"]',
)


def ensure_image(name: str = DEFAULT_IMAGE, *, force: bool = False, mirror: str = MIRROR) -> str:
    """The id of image ``name``, built first when it is missing, from an older recipe, or ``force``d.

    Building needs root, ``debootstrap`` and the Debian mirror (about a minute);
    an existing image is returned at once, so callers may call this every time.
    """
    from docker.errors import DockerException, ImageNotFound

    from workbench.sandbox.daemon import connect

    client = connect("sandbox image")
    try:
        old_id = None
        try:
            image = client.images.get(name)
            if not force and (image.labels or {}).get(IMAGE_LABEL) == VERSION:
                return str(image.id)
            old_id = image.id
        except ImageNotFound:
            pass
        repository, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "latest")
        with tempfile.TemporaryDirectory(prefix="nel-sandbox-image-") as tmp:
            tarball = _build_rootfs_tar(Path(tmp), mirror)
            client.api.import_image_from_file(str(tarball), repository=repository, tag=tag, changes=list(_CHANGES))
        new_id = str(client.images.get(name).id)
        if old_id and old_id != new_id:
            with contextlib.suppress(DockerException):  # still used by a container: leave it
                client.images.remove(old_id)
        return new_id
    finally:
        client.close()


def _build_rootfs_tar(tmp: Path, mirror: str) -> Path:
    """debootstrap a minbase rootfs under ``tmp`` and pack it as ``tmp/rootfs.tar``."""
    if os.geteuid() != 0:
        raise UsageError("sandbox image: building it needs root (debootstrap creates device files and owners)")
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise UsageError("sandbox image: building it needs debootstrap (apt-get install debootstrap)")
    rootfs = tmp / "rootfs"
    argv = [debootstrap, "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(rootfs), mirror]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-2000:]
        raise UsageError(f"sandbox image: debootstrap failed (exit {done.returncode}):\n{tail}")
    work = rootfs / WORKDIR.lstrip("/")
    work.mkdir(exist_ok=True)
    os.chown(work, SANDBOX_UID, SANDBOX_UID)
    work.chmod(0o700)
    for cache in (rootfs / "var/cache/apt/archives", rootfs / "var/lib/apt/lists"):
        for entry in cache.glob("*"):
            if entry.is_file():
                entry.unlink()
    tarball = tmp / "rootfs.tar"
    subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tarball), "."], check=True)
    return tarball
