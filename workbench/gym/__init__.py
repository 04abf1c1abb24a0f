"""NeMo Gym interop: importing rollout files, remote environments and Responses-API shapes."""
