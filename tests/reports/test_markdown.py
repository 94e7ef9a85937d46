from reports.markdown import render_summary


def _document():
    return {
        "config": {"seed": 4, "training": {"clients": 10, "tau": 15, "batch_size": 1}},
        "data": {"dataset": "digits", "partition": "iid"},
        "model": {"name": "cnn", "num_params": 6422},
        "environment": {"device": "cpu"},
        "mechanism": {"name": "sdq", "params": {"bits": 4, "support": 0.5},
                      "guarantee_summary": "no privacy guarantee"},
        "final": {"round": 2, "test_accuracy": 0.9123, "best_test_accuracy": 0.95, "test_loss": 0.31,
                  "bits_per_coordinate": 3.2, "compression_vs_float32": 10.0, "uplink_bits_total": 8_000_000},
        "rounds": [
            {"round": 1, "lr": 0.01, "test_accuracy": 0.5, "test_loss": 1.5, "bits_per_coordinate": 3.1},
            {"round": 2, "lr": 0.005, "test_accuracy": 0.9123, "test_loss": 0.31, "bits_per_coordinate": 3.3},
        ],
        "observations": [{"round": 2}],
    }


def test_summary_carries_the_numbers_with_units():
    text = render_summary(_document())
    assert "Mechanism `sdq` (bits=4, support=0.5)" in text
    assert "| final test accuracy | 91.23% | `public` model |" in text
    assert "| uplink rate | 3.200 | bits/coordinate (float32 = 32) |" in text
    assert "| compression vs float32 | 10.00x | |" in text
    assert "| uplink total | 1.000 | MB, all clients and rounds |" in text
    assert "| 2 | 0.005 | 91.23% | 0.3100 | 3.300 |" in text
    assert "recorded at rounds: 2." in text


def test_summary_states_the_composed_claim_or_its_refusal():
    document = _document()
    document["accounting"] = {
        "rounds": 2, "delta": 1e-5, "refusal": None,
        "composed": {"epsilon": 40.0, "delta": 0.0, "rounds": 2, "backend": "basic composition", "event": "x"},
        "composed_actual": {"epsilon": 314.56, "delta": 0.0, "rounds": 2, "backend": "basic composition",
                            "event": "y"},
    }
    text = render_summary(document)
    assert "| claimed over 2 rounds | (eps=40, delta=0) via basic composition |" in text
    assert "| realised noise over 2 rounds | (eps=314.6, delta=0) via basic composition |" in text
    document["accounting"].update(composed=None, composed_actual=None, refusal="sdq claims no privacy")
    assert "| claimed over 2 rounds | no number: sdq claims no privacy |" in render_summary(document)
