"""The reconstructions section: a clean reference once for the settings that share it, each setting's grids apart,
from the results document alone."""
import copy

from auditkit.results import as_model
from auditkit.reports.sections.reconstructions import grid_paths, reconstructions

SHARED = "figures/probe-clean-000000000000.png"


def _settings(referenced):
    """The audit document (a third setting without grids) with a copy of JoPEQ's whose probe shares JoPEQ's clean
    reference, and a first setting whose probe has its own (another clip: another clean reference)."""
    third = copy.deepcopy(referenced["settings"][1])
    third.update(id="s03", label="JoPEQ eps=4")
    referenced["settings"].append(third)
    for setting in (referenced["settings"][1], third):
        setting["probe"]["clean_figure"] = SHARED
    first = referenced["settings"][0]
    first["probe"] = copy.deepcopy(third["probe"]) | {"figure": "figures/probe-s00.png",
                                                      "clean_figure": "figures/probe-clean-111111111111.png"}
    return as_model(referenced).settings


def test_a_reference_shared_by_some_settings_names_them_and_one_alone_stays_in_its_fold(referenced):
    section = reconstructions(_settings(referenced))
    assert [grid.path for grid in section.references] == ["figures/reconstruction-clean-0123456789ab.png", SHARED]
    assert section.references[0].caption.startswith("Clean reference for every setting: ")
    assert section.references[1].caption.startswith("Clean reference of the probe for JoPEQ | eps=1, JoPEQ eps=4: ")
    assert [[grid.path for grid in block.grids] for block in section.settings] == [
        ["figures/reconstruction-s00.png", "figures/probe-clean-111111111111.png", "figures/probe-s00.png"],
        ["figures/reconstruction-s01.png", "figures/probe-s01.png"],
        ["figures/reconstruction-s01.png", "figures/probe-s01.png"]]
    assert section.settings[0].grids[1].caption.startswith("Clean reference of the probe for this setting: ")
    assert section.paths() == ["figures/reconstruction-clean-0123456789ab.png", SHARED,
                               "figures/reconstruction-s00.png", "figures/probe-clean-111111111111.png",
                               "figures/probe-s00.png", "figures/reconstruction-s01.png", "figures/probe-s01.png"]


def test_every_grid_file_is_named_once(referenced):
    assert grid_paths(_settings(referenced)) == [
        "figures/reconstruction-s00.png", "figures/reconstruction-clean-0123456789ab.png", "figures/probe-s00.png",
        "figures/probe-clean-111111111111.png", "figures/reconstruction-s01.png", "figures/probe-s01.png", SHARED]


def test_a_document_from_before_the_references_keeps_its_clean_rows(document):
    section = reconstructions(as_model(document).settings)
    assert section.references == ()
    captions = [grid.caption for block in section.settings for grid in block.grids]
    assert captions[0].endswith("(rows: ground truth, clean, defended).")
    assert "rows: the client's example, the clean reconstruction, the defended one" in captions[-1]
    assert [block.summary for block in section.settings] == [
        "inversion SSIM 0.97 clean → 0.97 defended",
        "inversion SSIM 0.41 clean → 0.02 defended; probe SSIM 1.00 clean → 0.05 defended"]
