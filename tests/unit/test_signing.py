"""Tests of robot_mcp_kit.signing: the HMAC scheme of kit spec §3.1 and its receiver checks."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from robot_mcp_kit import SignatureError
from robot_mcp_kit.signing import (
    DEFAULT_MAX_SKEW_S,
    HEADER_SERVER,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    TIMESTAMP_PATTERN,
    check,
    sign,
    signed_headers,
    verify,
)

SECRET = "s3cret"
TS = 1765532000
BODY = b'{"seq":1}'

# Known-answer vectors, computed independently of this code with OpenSSL:
#   printf '1765532000.{"seq":1}' | openssl dgst -sha256 -hmac s3cret
#   printf '1765532000.' | openssl dgst -sha256 -hmac s3cret
#   printf '1700000000.{"event_id":"e1","payload":{"eta_s":9.4}}' \
#       | openssl dgst -sha256 -hmac nav-secret
KNOWN_ANSWERS = [
    (
        "s3cret",
        1765532000,
        b'{"seq":1}',
        "25e57916dd7db574a4006074ed1aa6fd0e6e15be5a868130ebfe7fa4f410395f",
    ),
    ("s3cret", 1765532000, b"", "749c43f515532ab88ec9261c9e76e29b4aa57c24824d4429f468e6e30519a070"),
    (
        "nav-secret",
        1700000000,
        b'{"event_id":"e1","payload":{"eta_s":9.4}}',
        "2b83f2fe368ae230de9c3122f236089b010085ae948f130c8546aec41182f42a",
    ),
]

GOOD_SIG = "sha256=" + KNOWN_ANSWERS[0][3]

secrets_st = st.text(st.characters(codec="utf-8"), min_size=1, max_size=64)
bodies_st = st.binary(max_size=2048)
timestamps_st = st.integers(min_value=0, max_value=10**12 - 1)  # 1 to 12 digits


class TestSign:
    @pytest.mark.parametrize(("secret", "timestamp", "body", "expected"), KNOWN_ANSWERS)
    def test_sign_matches_known_answer_vector(self, secret, timestamp, body, expected):
        """sign() equals HMAC-SHA256(secret, f"{ts}.{body}") as computed by OpenSSL."""
        assert sign(secret, timestamp, body) == expected

    def test_signed_headers_carry_server_timestamp_and_prefixed_signature(self):
        """signed_headers() produces the three X-RVC-* headers of spec §3.1 plus JSON type."""
        headers = signed_headers("navigation", SECRET, BODY, TS)
        assert headers == {
            "Content-Type": "application/json",
            HEADER_SERVER: "navigation",
            HEADER_TIMESTAMP: "1765532000",
            HEADER_SIGNATURE: GOOD_SIG,
        }


class TestRoundTrip:
    @given(secret=secrets_st, body=bodies_st, timestamp=timestamps_st)
    def test_signed_body_verifies(self, secret, body, timestamp):
        """Whatever the secret, body and timestamp, a freshly signed body verifies."""
        header = "sha256=" + sign(secret, timestamp, body)
        assert verify(secret, timestamp, body, header, now_s=timestamp)
        check(secret, str(timestamp), body, header, now_s=timestamp)

    @given(secret=secrets_st, other=secrets_st, body=bodies_st, timestamp=timestamps_st)
    def test_other_secret_does_not_verify(self, secret, other, body, timestamp):
        """A body signed with one secret never verifies under a different one."""
        assume(secret != other)
        header = "sha256=" + sign(secret, timestamp, body)
        assert not verify(other, timestamp, body, header, now_s=timestamp)

    def test_uppercase_hex_is_accepted(self):
        """Hex digits are compared case-insensitively."""
        assert verify(SECRET, TS, BODY, GOOD_SIG.upper().replace("SHA256=", "sha256="), now_s=TS)


def _reason(*args, **kwargs) -> str:
    with pytest.raises(SignatureError) as info:
        check(*args, **kwargs)
    assert str(info.value)  # every rejection carries a human sentence
    return info.value.reason


class TestRejections:
    def test_bad_signature_is_rejected(self):
        """A well-formed signature made with another secret is a bad_signature."""
        header = "sha256=" + sign("other", TS, BODY)
        assert _reason(SECRET, TS, BODY, header, now_s=TS) == "bad_signature"
        assert not verify(SECRET, TS, BODY, header, now_s=TS)

    def test_tampered_body_is_rejected(self):
        """Changing one byte of the body breaks the signature."""
        tampered = b'{"seq":2}'
        assert _reason(SECRET, TS, tampered, GOOD_SIG, now_s=TS) == "bad_signature"
        assert not verify(SECRET, TS, tampered, GOOD_SIG, now_s=TS)

    def test_timestamp_is_part_of_the_signature(self):
        """Replaying a signature under another (still fresh) timestamp fails."""
        assert _reason(SECRET, TS + 1, BODY, GOOD_SIG, now_s=TS) == "bad_signature"

    @pytest.mark.parametrize(
        ("skew", "reason"),
        [
            (-(DEFAULT_MAX_SKEW_S + 1), "stale_timestamp"),
            (-3600, "stale_timestamp"),
            (DEFAULT_MAX_SKEW_S + 1, "future_timestamp"),
            (3600, "future_timestamp"),
        ],
    )
    def test_timestamp_beyond_tolerance_is_rejected(self, skew, reason):
        """A timestamp more than 300 s from the receiver's clock, either side, is refused."""
        ts = TS + skew
        header = "sha256=" + sign(SECRET, ts, BODY)
        assert _reason(SECRET, ts, BODY, header, now_s=TS) == reason
        assert not verify(SECRET, ts, BODY, header, now_s=TS)

    @pytest.mark.parametrize("skew", [-DEFAULT_MAX_SKEW_S, -299, 0, 299, DEFAULT_MAX_SKEW_S])
    def test_timestamp_within_tolerance_is_accepted(self, skew):
        """Up to and including 300 s of skew either side, a correct signature verifies."""
        ts = TS + skew
        header = "sha256=" + sign(SECRET, ts, BODY)
        check(SECRET, ts, BODY, header, now_s=TS)
        assert verify(SECRET, ts, BODY, header, now_s=TS)

    def test_custom_skew_is_honoured(self):
        """max_skew_s narrows the window."""
        header = "sha256=" + sign(SECRET, TS - 10, BODY)
        assert _reason(SECRET, TS - 10, BODY, header, now_s=TS, max_skew_s=5) == ("stale_timestamp")

    @pytest.mark.parametrize(
        "header",
        [
            pytest.param(KNOWN_ANSWERS[0][3], id="missing-prefix"),
            pytest.param("sha1=" + KNOWN_ANSWERS[0][3], id="wrong-prefix"),
            pytest.param(GOOD_SIG[:-1], id="too-short"),
            pytest.param(GOOD_SIG + "0", id="too-long"),
            pytest.param("sha256=" + "z" * 64, id="non-hex"),
            pytest.param("sha256=", id="empty-digest"),
            pytest.param("", id="empty"),
        ],
    )
    def test_malformed_signature_header_is_rejected(self, header):
        """Anything but 'sha256=<64 hex>' is a malformed_signature, not a crash."""
        assert _reason(SECRET, TS, BODY, header, now_s=TS) == "malformed_signature"
        assert not verify(SECRET, TS, BODY, header, now_s=TS)

    @pytest.mark.parametrize("timestamp", ["", "abc", "1765532000.5", "1e9", "  ", "0x10"])
    def test_malformed_timestamp_is_rejected(self, timestamp):
        """A timestamp header that is not integer unix seconds is malformed_timestamp."""
        assert _reason(SECRET, timestamp, BODY, GOOD_SIG, now_s=TS) == "malformed_timestamp"
        assert not verify(SECRET, timestamp, BODY, GOOD_SIG, now_s=TS)

    def test_timestamp_header_string_is_accepted(self):
        """The raw header string form of a valid timestamp verifies like the int."""
        check(SECRET, "1765532000", BODY, GOOD_SIG, now_s=TS)


class TestCanonicalTimestamp:
    """Issue 9, finding 6: the timestamp header is 1 to 12 ASCII digits, canonical."""

    @pytest.mark.parametrize(
        "timestamp",
        [
            pytest.param("01765532000", id="leading-zero"),
            pytest.param("+1765532000", id="plus-sign"),
            pytest.param("1_765_532_000", id="underscores"),
            pytest.param(" 1765532000", id="leading-space"),
            pytest.param("1765532000 ", id="trailing-space"),
            pytest.param("1765532000\n", id="trailing-newline"),
            pytest.param(
                "\u0661\u0667\u0666\u0665\u0665\u0663\u0662\u0660\u0660\u0660", id="arabic-indic"
            ),
            pytest.param(
                "\uff11\uff17\uff16\uff15\uff15\uff13\uff12\uff10\uff10\uff10", id="fullwidth"
            ),
        ],
    )
    def test_non_canonical_spelling_of_a_valid_timestamp_is_refused(self, timestamp):
        """Another spelling of TS, with TS's correct signature, is malformed, not accepted."""
        assert int(timestamp) == TS  # Python's int() would have taken it
        assert _reason(SECRET, timestamp, BODY, GOOD_SIG, now_s=TS) == "malformed_timestamp"
        assert not verify(SECRET, timestamp, BODY, GOOD_SIG, now_s=TS)

    @pytest.mark.parametrize(
        "timestamp",
        [
            pytest.param("1" * 300, id="300-digits"),
            pytest.param("9" * 400, id="400-digits-overflows-a-float"),
            pytest.param("9" * 5000, id="5000-digits-beyond-int-str-limit"),
            pytest.param("1" * 13, id="13-digits"),
            pytest.param("-1765532000", id="negative"),
            pytest.param("-0", id="minus-zero"),
            pytest.param("00", id="double-zero"),
            pytest.param(10**12, id="int-13-digits"),
            pytest.param(-1, id="int-negative"),
            pytest.param(10**400, id="int-huge"),
            pytest.param(True, id="bool"),
            pytest.param(None, id="none"),
            pytest.param(1765532000.0, id="float"),
            pytest.param(b"1765532000", id="bytes"),
        ],
    )
    def test_out_of_range_or_non_string_timestamp_is_malformed_not_a_crash(self, timestamp):
        """Huge, negative and non-text timestamps are malformed_timestamp; nothing raises."""
        assert _reason(SECRET, timestamp, BODY, GOOD_SIG, now_s=TS) == "malformed_timestamp"
        assert verify(SECRET, timestamp, BODY, GOOD_SIG, now_s=TS) is False

    @pytest.mark.parametrize(
        ("timestamp", "reason"),
        [("0", "stale_timestamp"), ("999999999999", "future_timestamp")],
    )
    def test_zero_and_twelve_digits_are_well_formed(self, timestamp, reason):
        """The timestamps "0" and twelve 9s pass the format check; the clock judges them."""
        assert TIMESTAMP_PATTERN.fullmatch(timestamp)
        assert _reason(SECRET, timestamp, BODY, GOOD_SIG, now_s=TS) == reason

    def test_signature_header_with_a_trailing_newline_is_malformed(self):
        """Finding 5: 'sha256=<64 hex>\\n' is refused, not matched up to the newline."""
        assert _reason(SECRET, TS, BODY, GOOD_SIG + "\n", now_s=TS) == "malformed_signature"

    @pytest.mark.parametrize(
        "secret", ["\ud800", None, b"s3cret"], ids=["surrogate", "none", "bytes"]
    )
    def test_unusable_secret_is_a_signature_error(self, secret):
        """A secret that cannot be encoded is refused as unusable_secret; verify says False."""
        assert _reason(secret, TS, BODY, GOOD_SIG, now_s=TS) == "unusable_secret"
        assert verify(secret, TS, BODY, GOOD_SIG, now_s=TS) is False


# Every code point, surrogates included, plus strings built to look almost like numbers.
any_text = st.text(st.characters(exclude_categories=()), max_size=60)
numberish = st.from_regex(
    r"[ +\-_0\n]{0,2}[0-9\u0660-\u0669\uff10-\uff19_]{0,20}[ \n_]{0,2}", fullmatch=True
)
header_values = (
    any_text
    | numberish
    | st.integers(min_value=-(10**15), max_value=10**15).map(str)
    | st.text("0123456789", min_size=250, max_size=450)
)
any_objects = st.none() | st.booleans() | st.floats() | st.binary(max_size=20) | st.integers()
REASONS = {
    "malformed_timestamp",
    "stale_timestamp",
    "future_timestamp",
    "malformed_signature",
    "bad_signature",
    "unusable_secret",
}
FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class TestNeverRaisesAnythingElse:
    """Issue 9: check() raises only SignatureError, verify() never raises, whatever arrives."""

    @FUZZ
    @given(
        secret=any_text,
        timestamp=header_values | any_objects,
        signature=header_values | any_objects | st.just(GOOD_SIG),
        body=bodies_st,
    )
    def test_check_raises_only_signature_error_and_verify_only_answers(
        self, secret, timestamp, signature, body
    ):
        """Arbitrary header values and secrets: SignatureError or success; verify agrees."""
        reason: str | None = None
        try:
            check(secret, timestamp, body, signature, now_s=TS)
        except SignatureError as exc:  # anything else fails the test
            reason, message = exc.reason, str(exc)
        accepted = reason is None
        if reason is not None:
            assert reason in REASONS
            assert message
        assert verify(secret, timestamp, body, signature, now_s=TS) is accepted

    @FUZZ
    @given(timestamp=numberish | header_values)
    def test_a_correctly_signed_timestamp_verifies_only_when_canonical(self, timestamp):
        """Signed with the value Python's int() reads, a header verifies iff it is canonical."""
        try:
            value = int(timestamp)
        except ValueError:
            value = TS
        assume(0 <= value < 10**15)
        header = "sha256=" + sign(SECRET, value, BODY)
        canonical = timestamp == str(value) and value < 10**12
        assert verify(SECRET, timestamp, BODY, header, now_s=value) is canonical
