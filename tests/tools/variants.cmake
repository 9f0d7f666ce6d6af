# The user variants of the test build (scripts/test.sh configures with -DLRT_VARIANTS_FILE=<this
# file>): tools.registry_round_trip trains, evaluates, samples and resumes them with the
# built-in pairs, and tools.user_variant checks their names and what their checkpoints record.
lrt_add_variant(NAME kv-src2
                VARIANT "lrt::Variant<lrt::Injection::KV, lrt::Projection::Shared, lrt::BlockSource<2>>"
                SCHEDULE "lrt::Interleaved<3>")
# A structure no built-in pair has, with its natural schedule (interleaved:2).
lrt_add_variant(NAME residual-src1 VARIANT "lrt::Variant<lrt::Injection::Residual, lrt::Projection::Shared, lrt::BlockSource<1>>")
