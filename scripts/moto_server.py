"""Run moto's S3 server on a loopback port, single-threaded by default.

Single-threaded matters: moto's threaded server checks a precondition and then
writes without a lock, so concurrent conditional PUTs can both win. Serving one
request at a time makes every conditional write atomic, as on AWS.

Prints the port on the first line of stdout once listening, and exits when its
standard input closes (so a test process that dies never leaves a server behind),
or, with --until-killed, only when it is killed (a job in the background of a
shell, whose standard input it must not read: the README's tutorial).
Usage: python moto_server.py [--port N] [--threaded] [--until-killed] [--tls CERT_PEM KEY_PEM]
"""
import argparse
import os
import sys
import threading

from werkzeug.serving import make_server
from moto.server import DomainDispatcherApplication, create_backend_app


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--threaded", action="store_true")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve HTTPS with this certificate")
    ap.add_argument("--until-killed", action="store_true", help="do not watch standard input; run until killed")
    args = ap.parse_args()
    app = DomainDispatcherApplication(create_backend_app)
    ssl_context = tuple(args.tls) if args.tls else None
    srv = make_server("127.0.0.1", args.port, app, threaded=args.threaded, ssl_context=ssl_context)
    print(srv.server_port, flush=True)

    def exit_on_stdin_eof():
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    if not args.until_killed:
        threading.Thread(target=exit_on_stdin_eof, daemon=True).start()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
