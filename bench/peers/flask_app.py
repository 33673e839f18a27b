"""The seed articles' design, as a peer for scripts/bench.sh: a small web
app over Redis. GET /<code> looks the code up in Redis and answers 302 with
the stored URL (404 if unknown); POST /api/v1/links stores a new code.
Run under gunicorn: gunicorn -w 2 -b 127.0.0.1:PORT flask_app:app
(REDIS_URL names the Redis server; default redis://127.0.0.1:6379/0)."""
import os
import secrets
import string

import redis
from flask import Flask, abort, jsonify, redirect, request

app = Flask(__name__)
db = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), decode_responses=True)
ALPHABET = string.ascii_letters + string.digits


@app.get("/<code>")
def follow(code):
    url = db.get("link:" + code)
    if url is None:
        abort(404)
    return redirect(url, code=302)


@app.post("/api/v1/links")
def create():
    url = (request.get_json(silent=True) or {}).get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        abort(400)
    while True:
        code = "".join(secrets.choice(ALPHABET) for _ in range(7))
        if db.set("link:" + code, url, nx=True):
            return jsonify(code=code, url=url), 201
