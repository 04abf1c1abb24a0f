"""``nel sandbox image`` builds the sandbox image locally; ``nel sandbox clean`` removes leftover containers;
``nel sandbox engine start`` starts the Docker engine when it is installed but not running."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.extras import require


def cmd_sandbox_image(args: argparse.Namespace) -> int:
    require("docker")  # the docker SDK drives the engine
    from workbench.sandbox.image import ensure_image

    print(f"nel: building {args.image} from Debian bookworm with debootstrap (about a minute; nothing is pulled)"
          if args.force else f"nel: {args.image}: building it if it is missing")
    image_id = ensure_image(args.image, force=args.force)
    print(f"{args.image}  {image_id}")
    return 0


def cmd_sandbox_clean(args: argparse.Namespace) -> int:
    require("docker")  # the docker SDK drives the engine
    from workbench.sandbox.daemon import connect
    from workbench.sandbox.docker import orphaned_owners, remove_containers

    client = connect("sandbox clean")
    try:
        owners = [None] if args.all else orphaned_owners(client)
        removed = sum(remove_containers(client, owner) for owner in owners)
    finally:
        client.close()
    what = "sandbox containers" if args.all else "leftover sandbox containers (their process is gone)"
    print(f"removed {removed} {what}")
    return 0


def cmd_sandbox_engine_start(args: argparse.Namespace) -> int:
    require("docker")  # the docker SDK drives the engine
    from workbench.sandbox.daemon import connect, engine_address, start_engine
    from workbench.sandbox.image import DEFAULT_IMAGE

    log = Path(args.log)
    started = start_engine(log)
    where = engine_address()
    if started is None:
        print(f"nel: the Docker engine already answers at {where}")
    else:
        print(f"nel: started dockerd (pid {started.pid}, log {log}); it answers at {where} and keeps running "
              f"after nel exits (stop it with: kill {started.pid})")
    client = connect("sandbox engine")
    try:
        names = {tag for image in client.images.list() for tag in image.tags}
    finally:
        client.close()
    if DEFAULT_IMAGE not in names:
        print(f"nel: next: build the sandbox image with `nel sandbox image` ({DEFAULT_IMAGE} is not there yet)")
    return 0
