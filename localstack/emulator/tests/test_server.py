"""emulator/server.py: it binds loopback only, and its fault settings endpoint
answers the settings in force (and refuses a bad one)."""

import json
import unittest
import urllib.error
import urllib.request

from emulator.server import loopback
from emulator.tests import support


class Server(unittest.TestCase):
    def test_only_loopback_hosts(self):
        for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
            self.assertTrue(loopback(host), host)
        for host in ("0.0.0.0", "10.0.0.1", "example.com", "::"):
            self.assertFalse(loopback(host), host)

    def test_fault_settings_are_answered_and_checked(self):
        try:
            state = support.faults({"throttle": 0.25})
            self.assertEqual(state["throttle"], 0.25)
            self.assertIn("counts", state)
        finally:
            support.faults(support.FAULTS_OFF)
        req = urllib.request.Request(support.ENDPOINT + "/_clockwork/faults", data=json.dumps({"throttle": "lots"}).encode(), method="POST")
        with self.assertRaises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        self.assertEqual(err.exception.code, 400)


if __name__ == "__main__":
    unittest.main()
