import Testing

/// Every integration suite nests here, so they run one at a time: several
/// start daemons and load both cores, and what they check (ordering, a slow
/// client's effect on the others, coalescing) must not depend on what a
/// neighbouring test happens to be doing.
@Suite(.serialized, .enabled(if: TestDatabase.isAvailable, "needs PGHERALD_TEST_CONNINFO (scripts/test)"))
struct IntegrationTests {}
