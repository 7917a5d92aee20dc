"""The C2PA signer's certificate chain: the studio's when configured (policy signing_cert/signing_key, or
$FACE_FUSION_C2PA_CERT / $FACE_FUSION_C2PA_KEY), else a chain generated once per user: a local root and a leaf
with the extensions C2PA requires of a signing certificate (digital signature key usage, email-protection extended
key usage, subject and authority key identifiers, not a CA). Validators report that chain as untrusted."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from engine import policy
from engine.errors import EngineError
from engine.io import atomic
from engine.models.catalogue import default_models_dir

ENV_CERT, ENV_KEY = "FACE_FUSION_C2PA_CERT", "FACE_FUSION_C2PA_KEY"


def local_dir() -> Path:
    return Path(os.environ.get("FACE_FUSION_C2PA_DIR") or default_models_dir().parent / "c2pa")


def configured() -> tuple[str, str] | None:
    pol = policy.load()
    cert = os.environ.get(ENV_CERT) or pol.get("signing_cert")
    key = os.environ.get(ENV_KEY) or pol.get("signing_key")
    return (str(cert), str(key)) if cert and key else None


def chain_and_key() -> tuple[bytes, bytes, bool]:
    """(PEM chain leaf first, PEM private key, whether it is the studio's)."""
    studio = configured()
    if studio:
        try:
            return Path(studio[0]).read_bytes(), Path(studio[1]).read_bytes(), True
        except OSError as exc:
            raise EngineError(f"the studio's signing certificate or key cannot be read ({exc})",
                              f"check the policy's signing_cert/signing_key or ${ENV_CERT}/${ENV_KEY}") from exc
    d = local_dir()
    chain, key = d / "chain.pem", d / "signer_key.pem"
    if not (chain.is_file() and key.is_file()):
        generate(d)
    return chain.read_bytes(), key.read_bytes(), False


def _name(cn: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Face Fusion local signer"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def generate(folder: Path) -> None:
    """A P-256 root (10 years) and signing leaf (2 years), written atomically; the key readable by the user only."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    root_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    root_ski = x509.SubjectKeyIdentifier.from_public_key(root_key.public_key())
    root = (x509.CertificateBuilder().subject_name(_name("Face Fusion local root")).issuer_name(
        _name("Face Fusion local root")).public_key(root_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(root_ski, critical=False).sign(root_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(_name("Face Fusion engine signer")).issuer_name(root.subject)
        .public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=730))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(leaf_key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(root_ski), critical=False)
        .sign(root_key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    key_pem = leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    for name, data, mode in (("signer_key.pem", key_pem, 0o600),
                             ("chain.pem", leaf.public_bytes(pem) + root.public_bytes(pem), 0o644)):
        atomic.write_bytes(folder / name, data, mode, sync=True)
