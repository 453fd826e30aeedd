"""Starts moto_server's own WSGI app with requests handled one at a time.

moto_server (5.2.1) serves each request on its own thread and its DynamoDB backend takes no
lock, so two concurrent conditional writes (or transactions) can both pass their condition:
real DynamoDB never lets that happen. The allocator's correctness under concurrency rests on
those conditions, so the local runtime and the tests serialize requests through one lock.
Same arguments as moto_server: -H HOST -p PORT.
"""

import argparse
import logging
import os
import signal
import sys
import threading
import time

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args()

    # No access log: one stderr line per request costs time, and a parent that stops reading
    # our stderr would block us while we hold the lock below.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serialized(environ, start_response):
        with lock:
            # Materialize the body inside the lock: the backend does its work while iterating.
            return list(app(environ, start_response))

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # A terminal's Ctrl-C reaches the whole process group: ignore it, so the Node process that
    # started us can finish its batch and then stop us with SIGTERM.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def exit_with_parent() -> None:
        # Never outlive the process that started us (killed with SIGKILL, terminal closed).
        while True:
            time.sleep(1)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=exit_with_parent, daemon=True).start()
    run_simple(args.host, args.port, serialized, threaded=True)


if __name__ == "__main__":
    main()
