"""--command-config parsing and its mapping onto librdkafka and kafka-python."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kops.cluster.config import ClientConfig
from kops.inputs.properties import parse_properties, render_properties
from kops.cluster.redact import redact
from kops.errors import BadInput


def test_parse_properties_forms():
    props = parse_properties(
        "# comment\n! other comment\na=1\nb: 2\nc 3\nlong=x\\\n   y\nempty=\n"
    )
    assert props == {"a": "1", "b": "2", "c": "3", "long": "xy", "empty": ""}


def test_parse_properties_reads_what_java_reads():
    """The cases where a home-made parser and java.util.Properties.load part ways."""
    text = (
        "  # an indented comment\n"
        "key\\ with\\:odd\\=chars = value\n"          # escaped blank, ':' and '=' in a key
        "tabs\t=\tv\n"
        "path=C:\\\\kafka\\\\conf\n"                    # an escaped backslash stays one backslash
        "uni=caf\\u00e9\n"
        "nl=a\\nb\n"
        "two\\\\\n"                                   # an even number of backslashes: no continuation
        "cont=one \\\n    two\n"
        "dup=1\ndup=2\n"
        "colon:  spaced\n"
        "jaas=Login required password=\"p\\\\\\\"w\";\n"
    )
    props = parse_properties(text)
    assert props["key with:odd=chars"] == "value"
    assert props["tabs"] == "v"
    assert props["path"] == "C:\\kafka\\conf"
    assert props["uni"] == "café" and props["nl"] == "a\nb"
    assert props["two\\"] == ""
    assert props["cont"] == "one two"
    assert props["dup"] == "2" and props["colon"] == "spaced"
    assert props["jaas"] == 'Login required password="p\\"w";'


text_st = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@given(st.dictionaries(text_st.filter(bool), text_st, max_size=8), st.text(max_size=20).filter(lambda h: "\r" not in h))
def test_properties_round_trip_any_text(props, header):
    assert parse_properties(render_properties(props, header)) == props


def test_scram_mapping_and_redaction(tmp_path):
    f = tmp_path / "admin.properties"
    f.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="admin" password="s3cr3t-Pw";\n'
        "ssl.truststore.location=/tmp/ca.pem\nssl.truststore.type=PEM\n"
        "ssl.endpoint.identification.algorithm=\n"
    )
    cfg = ClientConfig.load(str(f))
    rd = cfg.librdkafka()
    assert rd["sasl.username"] == "admin" and rd["sasl.password"] == "s3cr3t-Pw"
    assert rd["ssl.ca.location"] == "/tmp/ca.pem" and rd["security.protocol"] == "SASL_SSL"
    assert rd["ssl.endpoint.identification.algorithm"] == "none"
    kp = cfg.kafka_python()
    assert kp["sasl_plain_username"] == "admin" and kp["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kp["ssl_cafile"] == "/tmp/ca.pem" and kp["ssl_check_hostname"] is False
    # the password never survives redaction, in any form
    assert "s3cr3t-Pw" not in redact(f"failed with {rd} and {f.read_text()}")


def test_jks_truststore_needs_pem(tmp_path):
    f = tmp_path / "c.properties"
    f.write_text("security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\n")
    with pytest.raises(BadInput, match="ssl.ca.location"):
        ClientConfig.load(str(f)).librdkafka()


def test_missing_file():
    with pytest.raises(BadInput, match="does not exist"):
        ClientConfig.load("/no/such/file.properties")
