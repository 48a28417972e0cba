from django.apps import AppConfig


class FindingsConfig(AppConfig):
    name = "apps.findings"
    label = "findings"
    verbose_name = "Findings"

    def ready(self) -> None:
        # The ledger's idle-allocation read (usage.selectors.idle_allocation_list, /api/v1/idle-allocations/)
        # is answered from the idle findings: this app sits above the ledger, so it registers itself there.
        from apps.findings.selectors import idle_allocation_list
        from apps.usage.selectors import register_idle_allocation_reader

        register_idle_allocation_reader(idle_allocation_list)
