"""The casino's configuration: its tables and the rulesets they deal under."""
