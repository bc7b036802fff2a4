"""The examples in the docstrings run and print what they say."""

import doctest

import pytest

import kernelpath.features
import kernelpath.online


@pytest.mark.parametrize(
    "module", [kernelpath.features, kernelpath.online], ids=lambda m: m.__name__
)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
