"""``nel sandbox image`` builds the sandbox image locally; ``nel sandbox clean`` removes leftover containers."""

from __future__ import annotations

import argparse

from workbench.errors import UsageError


def cmd_sandbox_image(args: argparse.Namespace) -> int:
    from workbench.sandbox.image import ensure_image

    print(f"nel: building {args.image} from Debian bookworm with debootstrap (about a minute; nothing is pulled)"
          if args.force else f"nel: {args.image}: building it if it is missing")
    image_id = ensure_image(args.image, force=args.force)
    print(f"{args.image}  {image_id}")
    return 0


def cmd_sandbox_clean(args: argparse.Namespace) -> int:
    import docker
    from docker.errors import DockerException

    from workbench.sandbox.docker import orphaned_owners, remove_containers

    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        raise UsageError(f"cannot reach the Docker engine: {exc}") from None
    try:
        owners = [None] if args.all else orphaned_owners(client)
        removed = sum(remove_containers(client, owner) for owner in owners)
    finally:
        client.close()
    what = "sandbox containers" if args.all else "leftover sandbox containers (their process is gone)"
    print(f"removed {removed} {what}")
    return 0
