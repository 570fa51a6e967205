"""Running a scenario: party processes, the in-process reference driver, reports."""
