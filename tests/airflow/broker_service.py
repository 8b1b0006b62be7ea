"""What ``systemctl stop|start|kill kafka`` is on a real host, for the ``command`` lifecycle tests:
``python broker_service.py ACTION BROKER_ID ZOOKEEPER STATE_DIR`` acts on one broker process of this
host (the ``local`` backend's process handling: SIGTERM, a relaunch with the saved command line,
SIGKILL). It runs on the far side of ``ssh``; an error is one line on stderr and exit code 1, as a
service manager's would be.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from kafka_controller.airflow.lifecycle import LifecycleError, LocalLifecycle

    if len(argv) != 4 or argv[0] not in ("stop", "start", "kill") or not argv[1].isdigit():
        print("usage: broker_service.py stop|start|kill BROKER_ID ZOOKEEPER STATE_DIR", file=sys.stderr)
        return 2
    action, broker_id, zookeeper, state_dir = argv[0], int(argv[1]), argv[2], argv[3]
    backend = LocalLifecycle(zookeeper, state_dir)
    try:
        getattr(backend, action)(broker_id, 60.0)
    except LifecycleError as e:
        print(f"broker_service: {e}", file=sys.stderr)
        return 1
    print(f"broker {broker_id}: {action} done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
