"""Starts moto_server's own WSGI app with requests handled one at a time.

moto_server (5.2.1) serves each request on its own thread and its DynamoDB backend takes no
lock, so two concurrent conditional writes (or transactions) can both pass their condition:
real DynamoDB never lets that happen. The allocator's correctness under concurrency rests on
those conditions, so the local runtime and the tests serialize requests through one lock.
Same arguments as moto_server: -H HOST -p PORT.
"""

import argparse
import signal
import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args()

    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serialized(environ, start_response):
        with lock:
            # Materialize the body inside the lock: the backend does its work while iterating.
            return list(app(environ, start_response))

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    run_simple(args.host, args.port, serialized, threaded=True)


if __name__ == "__main__":
    main()
