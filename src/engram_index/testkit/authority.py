"""A space authority that mints real space credentials, and members that sign requests with them."""

from __future__ import annotations

from dataclasses import dataclass, field

from engram_index.engram.auth.mint import SpaceClient, mint_credential
from engram_index.engram.identity.keys import P256, PrivateKey
from engram_index.testkit.plc import FakePlc, did_document, new_plc_did


@dataclass
class SpaceAuthority:
    """A DID (published in a FakePlc) holding the keys that sign its spaces' credentials."""

    plc: FakePlc
    alg: str = P256
    space_key: bool = True  # publish a dedicated #atproto_space key (else credentials use #atproto)
    did: str = field(default_factory=new_plc_did)
    pds: str = "https://pds.invalid"
    space_host: str | None = None  # published as #atproto_space_host when set

    def __post_init__(self) -> None:
        self.repo_key = PrivateKey.generate(self.alg)
        self.credential_key = PrivateKey.generate(self.alg) if self.space_key else self.repo_key
        self.publish()

    @property
    def kid(self) -> str:
        """The verification method credentials are signed with."""
        return "#atproto_space" if self.space_key else "#atproto"

    def publish(self) -> None:
        """(Re)publish the DID document with the current keys."""
        keys = {"#atproto": self.repo_key}
        if self.space_key:
            keys["#atproto_space"] = self.credential_key
        services = {"#atproto_pds": ("AtprotoPersonalDataServer", self.pds)}
        if self.space_host is not None:
            services["#atproto_space_host"] = ("AtprotoSpaceHost", self.space_host)
        self.plc.publish(self.did, did_document(self.did, keys, services))

    def rotate(self) -> None:
        """Replace the credential-signing key and publish the new document."""
        self.credential_key = PrivateKey.generate(self.alg)
        if not self.space_key:
            self.repo_key = self.credential_key
        self.publish()

    def space(self, skey: str = "main") -> str:
        """The URI of one of this authority's garden.engram spaces."""
        return f"at://{self.did}/space/garden.engram.space/{skey}"

    def credential(self, space: str, holder: PrivateKey, **kwargs: object) -> str:
        """A credential for `space` bound to `holder`'s key (kwargs go to mint_credential)."""
        return mint_credential(self.credential_key, self.did, space, holder.did_key,
                               kid=kwargs.pop("kid", self.kid), **kwargs)  # type: ignore[arg-type]

    def member(self, space: str, audience: str, *, style: str = "bare", **kwargs: object) -> SpaceClient:
        """A member with a fresh P-256 key and a credential for `space`, signing for `audience`."""
        key = PrivateKey.generate(P256)
        return SpaceClient(self.credential(space, key, **kwargs), key, audience, style=style)
