"""The interop suite's own Web Push sender pieces, written from the RFCs with `cryptography`'s
primitives (not pywebpush's http_ece): RFC 8291 message encryption in RFC 8188's aes128gcm
encoding, and RFC 8292 VAPID tokens (ES256 JWTs). A second, independent encoder shows the mock
decrypts what any correct sender writes, and its knobs (auth secret, padding delimiter, record
size) make the bodies a browser could not decrypt. bench/bench_webpush.py uses it too, for its
one pre-encrypted body and token.
"""

import base64
import hashlib
import hmac
import json
import os
import struct
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

# Bytes of an aes128gcm body before its record: salt (16), rs (4), idlen (1), keyid (a 65-byte
# uncompressed P-256 point).
HEADER_LEN = 16 + 4 + 1 + 65
TAG_LEN = 16


def b64u(raw):
    """base64url without padding, as Web Push writes keys and salts."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64u(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def raw_public(key):
    """The uncompressed point (65 bytes) of a P-256 private or public key."""
    pub = key.public_key() if isinstance(key, ec.EllipticCurvePrivateKey) else key
    return pub.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


def _hmac(key, data):
    return hmac.new(key, data, hashlib.sha256).digest()


def encrypt_aes128gcm(plaintext, p256dh, auth, *, rs=4096, pad=0, delimiter=b"\x02", salt=None,
                      sender=None):
    """`plaintext` encrypted for the subscription keys `p256dh` and `auth` (base64url, as in the
    subscription JSON) as one aes128gcm record (RFC 8291 section 3.4 and RFC 8188 section 2):
    salt || rs || idlen || keyid || AES-128-GCM(plaintext || delimiter || pad zero bytes).
    `delimiter` 0x02 marks the last record; anything else makes a body that must not decrypt."""
    ua_public = unb64u(p256dh)
    auth_secret = unb64u(auth)
    sender = sender or ec.generate_private_key(ec.SECP256R1())
    as_public = raw_public(sender)
    shared = sender.exchange(ec.ECDH(), ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), ua_public))
    # HKDF-SHA-256 written out with the standard library's HMAC (RFC 5869): one block each.
    ikm = _hmac(_hmac(auth_secret, shared), b"WebPush: info\x00" + ua_public + as_public + b"\x01")
    salt = salt if salt is not None else os.urandom(16)
    prk = _hmac(salt, ikm)
    cek = _hmac(prk, b"Content-Encoding: aes128gcm\x00\x01")[:16]
    nonce = _hmac(prk, b"Content-Encoding: nonce\x00\x01")[:12]
    record = plaintext + delimiter + b"\x00" * pad
    header = salt + struct.pack(">I", rs) + bytes([len(as_public)]) + as_public
    return header + AESGCM(cek).encrypt(nonce, record, None)


def vapid_jwt(private_key, claims):
    """An RFC 8292 token: an ES256 JWT over `claims`, the signature raw r || s (RFC 7518)."""
    header = b64u(json.dumps({"typ": "JWT", "alg": "ES256"}, separators=(",", ":")).encode())
    body = b64u(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = f"{header}.{body}".encode()
    r, s = decode_dss_signature(private_key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
    return f"{header}.{body}.{b64u(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def vapid_header(private_key, aud, sub="mailto:interop@example.com", exp=None, **extra):
    """`Authorization: vapid t=…, k=…` for `aud` (the endpoint's origin), `exp` 12 hours ahead
    unless given; a `sub` of None leaves the claim out."""
    claims = {"aud": aud, "exp": int(time.time()) + 12 * 3600 if exp is None else exp}
    if sub is not None:
        claims["sub"] = sub
    claims.update(extra)
    return f"vapid t={vapid_jwt(private_key, claims)}, k={b64u(raw_public(private_key))}"
