"""Secure aggregation with dropouts (Bonawitz et al., CCS 2017), for summing integer vectors.

Source: Bonawitz, Ivanov, Kreuter, Marcedone, McMahan, Patel, Ramage, Segal & Seth,
"Practical Secure Aggregation for Privacy-Preserving Machine Learning", CCS 2017, §4 and
Figure 4 (the honest-but-curious protocol, without the signatures and the consistency
round of the actively secure variant). The server learns

    z = Σ_{u ∈ U₃} x_u  (mod m),

U₃ the clients whose masked input arrived, and nothing else about the x_u (beyond what z
tells), as long as it follows the protocol and fewer than t clients collude with it.

Rounds (client u ∈ {1, …, n}, Shamir point x = u):

0. *advertise*: two fresh X25519 key pairs, (c_u) to encrypt shares, (s_u) for masks;
1. *share keys*: a fresh self-mask seed b_u; t-of-n Shamir shares of s_u's private key and
   of b_u, one pair per other client v, encrypted with AES-GCM under
   HKDF-SHA256(X25519(c_u, c_v)) and relayed by the server;
2. *masked input*: with s_{u,v} = HKDF-SHA256(X25519(s_u, s_v)) and PRG a ChaCha20
   keystream reduced modulo m exactly (rejection sampling),

       y_u = x_u + PRG(b_u) + Σ_{v ∈ U₂, u < v} PRG(s_{u,v}) − Σ_{v ∈ U₂, u > v} PRG(s_{u,v})
             (mod m);

3. *unmasking*: the server names the survivors U₃ and the dropped U₂ ∖ U₃; each client
   checks the two sets are disjoint (it never reveals both secrets of one client) and
   returns its shares of b_u for u ∈ U₃ and of s_u's key for u ∈ U₂ ∖ U₃. From any t of
   them the server rebuilds the dropped clients' pairwise masks and the survivors' self
   masks and removes them: the pairwise masks of survivors cancel in the sum.

Every round needs at least t clients, or the protocol aborts (:class:`ProtocolAbortError`).
Shamir's scheme runs over GF(2³¹ − 1), each 32-byte secret split into nine 30-bit limbs,
so every product fits an int64 exactly. Every random bit (keys, seeds, coefficients)
comes from :mod:`dpkit.core.rng`; the masks are deterministic expansions of those seeds.
Everything runs in one process (:func:`secure_sum`); the messages are dataclasses, so the
server's view is what it holds. A round costs n(n − 1) X25519 key agreements and as many
mask expansions (``bench/results/secagg.md``), so :func:`check_round` refuses more than
:data:`MAX_CLIENTS` clients.

Why no privacy audit. The protocol adds no randomness to what it outputs: its output is
exactly Σ x_u mod m (tested), so the DP guarantee is the distributed discrete Gaussian's,
and its audit case (``local_distributed_dg``) audits that sum. What secure aggregation
hides — the single masked inputs — is hidden *computationally* (the keystream and the
Diffie–Hellman keys are indistinguishable from random to a bounded adversary), not by a
divergence between output laws: a black-box audit bounds ε from samples of an output, and
no number of samples separates ChaCha20 from uniform, so an audit would always pass and
prove nothing. The tests check what can fail: exact cancellation, a χ² test that a masked
input looks uniform (which catches unapplied masks and reused seeds) and Shamir's hiding by
brute force.

Threat model. Honest-but-curious server, colluding with fewer than t clients: it learns the
sum and which clients dropped. Not stopped: a malicious server that lies about who dropped
to different clients (the actively secure variant's signatures and consistency round are
not implemented), that feeds the clients forged public keys (no PKI: a man in the middle
learns everything), or that runs many rounds with chosen dropouts; clients that send
out-of-range inputs (nothing bounds a client's vector but the client itself).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from dpkit.core import rng
from dpkit.core.numbers import integer
from dpkit.errors import DomainError

__all__ = ["MAX_CLIENTS", "PRIME", "Advertise", "Client", "EncryptedShares", "MaskedInput",
           "ProtocolAbortError", "SecureSum", "Server", "Unmasking", "check_round",
           "default_threshold", "shamir_evaluate",
           "expand", "secure_sum", "shamir_reconstruct", "shamir_share"]

MAX_CLIENTS = 2048  # n(n − 1) key agreements per round: about 4 minutes at n = 1000
PRIME = (1 << 31) - 1  # the Shamir field; a product of two residues is below 2^62
_LIMB = 30  # bits of a secret per field element
_LIMBS = 9  # 9 × 30 ≥ 256 bits: one 32-byte secret
_RAW = serialization.Encoding.Raw, serialization.PublicFormat.Raw


class ProtocolAbortError(DomainError):
    """Fewer than t clients remain at some round, or a message does not check."""


# -- messages --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Advertise:
    """Round 0, client → server → all: the client's two public keys (32 bytes each)."""

    client: int
    c_public: bytes
    s_public: bytes


@dataclass(frozen=True)
class EncryptedShares:
    """Round 1, sender → server → receiver: AES-GCM of the receiver's shares of the sender's
    mask key and self-mask seed (the server cannot read them)."""

    sender: int
    receiver: int
    ciphertext: bytes


@dataclass(frozen=True)
class MaskedInput:
    """Round 2, client → server: y_u (int64 residues mod m, shape (d,))."""

    client: int
    masked: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class Unmasking:
    """Round 3, client → server: its shares (x = the client's index; (9,) limbs each) of the
    mask keys of the dropped clients and of the self-mask seeds of the survivors."""

    client: int
    key_shares: dict[int, np.ndarray]
    seed_shares: dict[int, np.ndarray]


# -- Shamir's secret sharing over GF(p) ------------------------------------------------------

def shamir_evaluate(coefficients: np.ndarray, points: np.ndarray, prime: int = PRIME
                    ) -> np.ndarray:
    """f(x) = Σ_j a_j x^j mod p for each point (Horner, exact in int64).

    Parameters
    ----------
    coefficients : ndarray of int, shape (t, k)
        a_0 (the secrets) … a_{t−1}, residues mod ``prime``; k secrets at once.
    points : ndarray of int, shape (n,)
        Points in [1, p).
    prime : int
        p < 2^31.

    Returns
    -------
    ndarray of int64, shape (n, k)
    """
    xs = np.asarray(points, dtype=np.int64)[:, None]
    coeffs = np.asarray(coefficients, dtype=np.int64)
    acc = np.zeros((xs.shape[0], coeffs.shape[1]), dtype=np.int64)
    for a in coeffs[::-1]:
        acc = (acc * xs + a) % prime
    return acc


def shamir_share(secret: np.ndarray, threshold: int, n: int, prime: int = PRIME) -> np.ndarray:
    """t-of-n shares of k field elements (Shamir 1979): a uniform polynomial of degree t − 1
    per element with the element as constant term, evaluated at x = 1 … n.

    Any t shares determine the secret (:func:`shamir_reconstruct`); any t − 1 are uniform on
    GF(p)^{t−1} whatever the secret (each secret has exactly one polynomial through them).

    Parameters
    ----------
    secret : ndarray of int, shape (k,)
        Residues mod ``prime``.
    threshold : int
        t, 1 ≤ t ≤ n.
    n : int
        Number of shares, n < p.
    prime : int
        p < 2^31.

    Returns
    -------
    ndarray of int64, shape (n, k)
        Row i is the share at x = i + 1.
    """
    s = np.asarray(secret, dtype=np.int64)
    drawn = rng.uniform_below(prime, (threshold - 1) * s.size).astype(np.int64)
    coeffs = np.vstack([s[None, :], drawn.reshape(threshold - 1, s.size)])
    return shamir_evaluate(coeffs, np.arange(1, n + 1), prime)


def shamir_reconstruct(shares: dict[int, np.ndarray], threshold: int, prime: int = PRIME
                       ) -> np.ndarray:
    """f(0) by Lagrange interpolation from t shares {x: f(x)} (the first t points).

    Raises
    ------
    ProtocolAbortError
        With fewer than t shares: the secret is not determined by them.
    """
    if len(shares) < threshold:
        raise ProtocolAbortError(f"{len(shares)} shares, {threshold} needed")
    xs = tuple(sorted(shares)[:threshold])
    weights = np.array(_lagrange_at_zero(xs, prime), dtype=np.int64)[:, None]
    rows = np.array([shares[x] for x in xs], dtype=np.int64)
    return ((weights * rows) % prime).sum(axis=0) % prime  # t terms below 2^31: no overflow


@functools.lru_cache(maxsize=64)
def _lagrange_at_zero(xs: tuple[int, ...], prime: int) -> tuple[int, ...]:
    """ℓ_i(0) = Π_{j≠i} x_j/(x_j − x_i) mod p (a server reuses them for every client)."""
    out = []
    for xi in xs:
        num, den = 1, 1
        for xj in xs:
            if xj != xi:
                num, den = num * -xj % prime, den * (xi - xj) % prime
        out.append(num * pow(den, -1, prime) % prime)
    return tuple(out)


def _limbs(secret: bytes) -> np.ndarray:
    value = int.from_bytes(secret, "big")
    return np.array([(value >> (_LIMB * i)) & ((1 << _LIMB) - 1) for i in range(_LIMBS)],
                    dtype=np.int64)


def _bytes(limbs: np.ndarray) -> bytes:
    value = sum(int(v) << (_LIMB * i) for i, v in enumerate(limbs))
    if value >> 256:
        raise ProtocolAbortError("a reconstructed secret is not 32 bytes")
    return value.to_bytes(32, "big")


# -- keys and masks -------------------------------------------------------------------------

def _fresh_key() -> X25519PrivateKey:
    return X25519PrivateKey.from_private_bytes(rng.random_bytes(32))  # bits from dpkit.core.rng


def _fresh_seed() -> bytes:
    return rng.random_bytes(32)


def _public(key: X25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(*_RAW)


def _agree(private: X25519PrivateKey, public: bytes, session: bytes, purpose: bytes) -> bytes:
    """HKDF-SHA256 of the X25519 shared secret: 32 bytes bound to the session and purpose."""
    shared = private.exchange(X25519PublicKey.from_public_bytes(public))
    return HKDF(hashes.SHA256(), 32, session, b"dpkit secagg " + purpose).derive(shared)


def expand(seed: bytes, length: int, modulus: int) -> np.ndarray:
    """PRG(seed): ``length`` residues mod m from the ChaCha20 keystream of the 32-byte seed.

    64-bit words are kept when below ⌊2^64/m⌋·m and reduced mod m (every residue equally
    likely, exactly; m a power of two keeps every word); at most a quarter are dropped
    (m ≤ 2^62). Deterministic in the seed, so both ends of a pair derive the same mask.

    Returns
    -------
    ndarray of int64, shape (length,), values in [0, m)
    """
    stream = Cipher(algorithms.ChaCha20(seed, bytes(16)), None).encryptor()
    limit = ((1 << 64) // modulus) * modulus
    out = np.empty(0, dtype=np.uint64)
    while out.size < length:
        need = length - out.size
        words = np.frombuffer(stream.update(bytes(8 * (need + need // 2 + 8))), dtype="<u8")
        if limit < 1 << 64:
            words = words[words < np.uint64(limit)]
        out = np.concatenate([out, words[:need]])
    return (out % np.uint64(modulus)).astype(np.int64)


# -- client and server ----------------------------------------------------------------------

class Client:
    """One client of the protocol (module docstring): index u ∈ [1, n], its keys and seeds.

    Parameters
    ----------
    index : int
        u, also its Shamir point.
    threshold : int
        t.
    modulus : int
        m ∈ [2, 2^62].
    session : bytes
        The round's identifier (binds keys and ciphertexts to it).
    """

    def __init__(self, index: int, threshold: int, modulus: int, session: bytes) -> None:
        self.index, self.t, self.m, self.session = index, threshold, modulus, session
        self._c, self._s, self._b = _fresh_key(), _fresh_key(), _fresh_seed()
        self._keys: dict[int, Advertise] = {}
        self._inbox: dict[int, bytes] = {}
        self._ciphers: dict[int, AESGCM] = {}
        self._u2: frozenset[int] = frozenset()
        self._told = False

    def advertise(self) -> Advertise:
        """Round 0."""
        return Advertise(self.index, _public(self._c), _public(self._s))

    def share_keys(self, advertised: Sequence[Advertise]) -> list[EncryptedShares]:
        """Round 1: encrypted shares of s_u's key and b_u for every other advertised client.

        Raises
        ------
        ProtocolAbortError
            Fewer than t clients advertised, or two advertised the same index.
        """
        self._keys = {a.client: a for a in advertised}
        if len(self._keys) != len(advertised) or len(self._keys) < self.t:
            raise ProtocolAbortError("fewer than t distinct clients advertised keys")
        n = max(self._keys)
        key_shares = shamir_share(_limbs(self._s.private_bytes_raw()), self.t, n)
        seed_shares = shamir_share(_limbs(self._b), self.t, n)
        out = []
        for v in sorted(self._keys):
            if v == self.index:
                self._inbox[v] = self._seal(v, key_shares[v - 1], seed_shares[v - 1])
                continue
            out.append(EncryptedShares(self.index, v,
                                       self._seal(v, key_shares[v - 1], seed_shares[v - 1])))
        return out

    def _cipher(self, other: int) -> AESGCM:
        if other not in self._ciphers:  # one key agreement per pair, both directions
            self._ciphers[other] = AESGCM(_agree(self._c, self._keys[other].c_public,
                                                 self.session, b"shares"))
        return self._ciphers[other]

    def _seal(self, v: int, key_share: np.ndarray, seed_share: np.ndarray) -> bytes:
        body = np.concatenate([key_share, seed_share]).astype("<i8").tobytes()
        return self._cipher(v).encrypt(_nonce(self.index, v), body, _ad(self.index, v))

    def _open(self, u: int) -> tuple[np.ndarray, np.ndarray]:
        try:
            body = self._cipher(u).decrypt(_nonce(u, self.index), self._inbox[u],
                                           _ad(u, self.index))
        except InvalidTag as exc:
            raise ProtocolAbortError(f"client {u}'s shares do not authenticate") from exc
        limbs = np.frombuffer(body, dtype="<i8").astype(np.int64)
        return limbs[:_LIMBS], limbs[_LIMBS:]

    def masked_input(self, value: npt.ArrayLike, received: Sequence[EncryptedShares]
                     ) -> MaskedInput:
        """Round 2: y_u (module docstring) for the clients U₂ whose shares reached u.

        Raises
        ------
        ProtocolAbortError
            Fewer than t clients in U₂, or a share not addressed to u.
        """
        for msg in received:
            if msg.receiver != self.index or msg.sender not in self._keys:
                raise ProtocolAbortError("a share was routed to the wrong client")
            self._inbox[msg.sender] = msg.ciphertext
        self._u2 = frozenset(self._inbox)
        if len(self._u2) < self.t:
            raise ProtocolAbortError("fewer than t clients shared their keys")
        x = np.asarray(value, dtype=np.int64) % self.m
        y = (x + expand(self._b, x.size, self.m)) % self.m
        for v in sorted(self._u2 - {self.index}):
            mask = expand(_agree(self._s, self._keys[v].s_public, self.session, b"mask"),
                          x.size, self.m)
            y = (y + mask if self.index < v else y - mask) % self.m
        return MaskedInput(self.index, y)

    def unmask(self, survivors: Iterable[int], dropped: Iterable[int]) -> Unmasking:
        """Round 3: shares of b_u for u ∈ U₃ and of s_u's key for u ∈ U₂ ∖ U₃. Answered once.

        Raises
        ------
        ProtocolAbortError
            If U₃ and the dropped set overlap, do not make up U₂, |U₃| < t, or u was asked
            already.
        """
        alive, gone = frozenset(survivors), frozenset(dropped)
        if self._told or alive & gone or alive | gone != self._u2 or len(alive) < self.t:
            raise ProtocolAbortError("the unmasking request is inconsistent")
        self._told = True  # never reveal both secrets of a client in a second answer
        opened = {u: self._open(u) for u in sorted(self._u2)}
        return Unmasking(self.index, {u: opened[u][0] for u in gone},
                         {u: opened[u][1] for u in alive})


def _nonce(sender: int, receiver: int) -> bytes:
    return sender.to_bytes(6, "big") + receiver.to_bytes(6, "big")  # one message per direction


def _ad(sender: int, receiver: int) -> bytes:
    return b"dpkit secagg shares %d->%d" % (sender, receiver)


class Server:
    """The aggregator: relays the messages and unmasks the sum (module docstring).

    Parameters
    ----------
    threshold : int
        t.
    modulus : int
        m.
    length : int
        d, the vectors' length.
    session : bytes
        The round's identifier (the clients' too).
    """

    def __init__(self, threshold: int, modulus: int, length: int, session: bytes) -> None:
        self.t, self.m, self.d, self.session = threshold, modulus, length, session
        self.advertised: dict[int, Advertise] = {}
        self.masked: dict[int, np.ndarray] = {}  # the server's view of each masked input

    def collect_keys(self, messages: Sequence[Advertise]) -> list[Advertise]:
        """Round 0 → 1: the public keys to broadcast (U₁).

        Raises
        ------
        ProtocolAbortError
            Fewer than t clients.
        """
        self.advertised = {a.client: a for a in messages}
        if len(self.advertised) < self.t:
            raise ProtocolAbortError("fewer than t clients advertised keys")
        return list(self.advertised.values())

    def route(self, messages: Iterable[EncryptedShares]) -> dict[int, list[EncryptedShares]]:
        """Round 1 → 2: each client's inbox."""
        inbox: dict[int, list[EncryptedShares]] = {}
        for msg in messages:
            inbox.setdefault(msg.receiver, []).append(msg)
        return inbox

    def collect_inputs(self, messages: Sequence[MaskedInput], shared: Iterable[int]
                       ) -> tuple[frozenset[int], frozenset[int]]:
        """Round 2 → 3: (U₃, U₂ ∖ U₃), U₂ = ``shared`` (the clients whose shares went out).

        Raises
        ------
        ProtocolAbortError
            Fewer than t masked inputs, or one of the wrong length.
        """
        self.masked = {msg.client: np.asarray(msg.masked, dtype=np.int64) for msg in messages}
        if len(self.masked) < self.t or any(y.shape != (self.d,) for y in self.masked.values()):
            raise ProtocolAbortError("fewer than t masked inputs of the declared length")
        u2 = frozenset(shared)
        alive = frozenset(self.masked) & u2
        return alive, u2 - alive

    def unmask(self, answers: Sequence[Unmasking], alive: frozenset[int],
               gone: frozenset[int]) -> np.ndarray:
        """Round 3: Σ_{u ∈ U₃} x_u mod m from at least t answers.

        Raises
        ------
        ProtocolAbortError
            Fewer than t answers.
        """
        if len(answers) < self.t:
            raise ProtocolAbortError("fewer than t clients answered the unmasking round")
        total = np.zeros(self.d, dtype=np.int64)
        for u in sorted(alive):
            total = (total + self.masked[u]) % self.m
            seed = _bytes(shamir_reconstruct({a.client: a.seed_shares[u] for a in answers},
                                             self.t))
            total = (total - expand(seed, self.d, self.m)) % self.m
        for u in sorted(gone):
            key = X25519PrivateKey.from_private_bytes(_bytes(shamir_reconstruct(
                {a.client: a.key_shares[u] for a in answers}, self.t)))
            for v in sorted(alive):  # v's masked input holds ±PRG(s_{v,u}); take it out
                mask = expand(_agree(key, self.advertised[v].s_public, self.session, b"mask"),
                              self.d, self.m)
                total = (total - mask if v < u else total + mask) % self.m
        return total


# -- one round in one process -----------------------------------------------------------------

@dataclass(frozen=True)
class SecureSum:
    """A round's outcome: ``total`` = Σ_{u ∈ survivors} x_u mod m ((d,) int64), the
    survivors' indices (1-based) and the server (its view: ``server.masked``)."""

    total: np.ndarray
    survivors: frozenset[int]
    server: Server


def default_threshold(n: int) -> int:
    """t = ⌊2n/3⌋ + 1, at most n: a sum needs more than two thirds of the clients."""
    return min(n, 2 * n // 3 + 1)


def check_round(n: int, threshold: int | None, drop_before_input: Iterable[int] = (),
                drop_before_unmask: Iterable[int] = ()) -> tuple[int, set[int], set[int]]:
    """Check a round's declared parameters (:func:`secure_sum`) without running it: at most
    :data:`MAX_CLIENTS` clients (the pairwise masks cost n(n − 1) key agreements).

    Returns
    -------
    (t, dropped before input, dropped before unmasking)

    Raises
    ------
    DomainError
        A threshold ∉ [1, n] or a dropped index ∉ [1, n].
    ProtocolAbortError
        Fewer than t clients would send a masked input or answer the unmasking round.
    """
    integer(n, "number of clients", minimum=1, maximum=MAX_CLIENTS)
    t = default_threshold(n) if threshold is None else integer(threshold, "threshold",
                                                                minimum=1, maximum=n)
    early, late = set(drop_before_input), set(drop_before_unmask)
    if not all(isinstance(u, int | np.integer) for u in early | late) or \
            not early | late <= set(range(1, n + 1)):
        raise DomainError("dropped clients must be integer indices in 1 … n")
    if n - len(early | late) < t:
        raise ProtocolAbortError(f"{n - len(early | late)} clients would remain, {t} needed")
    return t, early, late


def secure_sum(inputs: npt.ArrayLike, modulus: int, threshold: int | None = None, *,
               drop_before_input: Iterable[int] = (), drop_before_unmask: Iterable[int] = ()
               ) -> SecureSum:
    """Run one round of the protocol for n clients in this process.

    Parameters
    ----------
    inputs : array_like of int, shape (n, d)
        Client u's vector is row u − 1 (read mod m).
    modulus : int
        m ∈ [2, 2^62].
    threshold : int, optional
        t ∈ [1, n]; default :func:`default_threshold`.
    drop_before_input : iterable of int
        Clients (1-based) that share their keys but send no masked input: their input is
        not in the sum, and the server rebuilds their pairwise masks.
    drop_before_unmask : iterable of int
        Clients that send a masked input and then do not answer the unmasking round: their
        input is in the sum.

    Returns
    -------
    SecureSum

    Raises
    ------
    DomainError
        Bad parameters (before any key is drawn).
    ProtocolAbortError
        Fewer than t clients send a masked input or answer the unmasking round (checked
        before any key is drawn).
    """
    x = np.asarray(inputs)
    if x.ndim != 2 or x.shape[0] < 1 or not np.issubdtype(x.dtype, np.integer):
        raise DomainError("inputs must be an (n, d) integer array")
    n, d = x.shape
    m = integer(modulus, "modulus", minimum=2, maximum=1 << 62)
    t, early, late = check_round(n, threshold, drop_before_input, drop_before_unmask)
    session = rng.random_bytes(16)
    clients = [Client(u, t, m, session) for u in range(1, n + 1)]
    server = Server(t, m, d, session)
    keys = server.collect_keys([c.advertise() for c in clients])
    inbox = server.route(msg for c in clients for msg in c.share_keys(keys))
    for c in clients:  # a client's own shares never leave it
        inbox.setdefault(c.index, [])
    masked = [c.masked_input(x[c.index - 1], inbox[c.index]) for c in clients
              if c.index not in early]
    alive, gone = server.collect_inputs(masked, range(1, n + 1))
    answers = [c.unmask(alive, gone) for c in clients if c.index in alive - late]
    return SecureSum(server.unmask(answers, alive, gone), alive, server)
