"""An instance-metadata endpoint that refuses everything (403), as IMDS does
where it is disabled or the caller may not use it. Prints its port on the
first line of stdout; exits when its standard input closes."""
import http.server
import os
import sys
import threading


class Refuse(http.server.BaseHTTPRequestHandler):
    def do_PUT(self):
        self.send_response(403)
        self.end_headers()

    do_GET = do_PUT

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Refuse)
print(server.server_port, flush=True)


def exit_on_stdin_eof():
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


threading.Thread(target=exit_on_stdin_eof, daemon=True).start()
server.serve_forever()
