"""A stand-in for the `expecttest` package (a test-only dependency of torch.testing that is not
installed here), on sys.path after everything else: expected-output assertions pass unchecked,
the harness compares against eager itself."""
import unittest


class TestCase(unittest.TestCase):
    def assertExpectedInline(self, actual, expect, skip=0):
        pass

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        with self.assertRaises(exc_type):
            callable(*args, **kwargs)
