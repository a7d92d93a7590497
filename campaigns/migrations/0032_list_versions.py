"""Versions of the API's lists: a sequence each, moved on by every statement that changes a
table the list shows (campaigns.api.list_versions). A sequence, not a counter row: nextval
takes no lock, so the run drivers' many updates never wait on one another for it."""

from django.db import migrations

LISTS = {
    "runs": ["campaigns_run", "campaigns_campaign", "auth_user"],
    "campaigns": [
        "campaigns_campaign",
        "campaigns_campaign_sources",
        "campaigns_campaign_destinations",
        "campaigns_campaign_clients",
    ],
}

FUNCTION = """
CREATE FUNCTION storageops_list_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval(TG_ARGV[0]::regclass);
    RETURN NULL;
END $$;
"""


def forward_sql() -> list[str]:
    statements = [FUNCTION]
    for name, tables in LISTS.items():
        statements.append(f"CREATE SEQUENCE storageops_list_version_{name};")
        for table in tables:
            statements.append(
                f"CREATE TRIGGER storageops_list_{name}_{table} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
                f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION "
                f"storageops_list_changed('storageops_list_version_{name}');"
            )
    return statements


def backward_sql() -> list[str]:
    statements = []
    for name, tables in LISTS.items():
        statements += [f"DROP TRIGGER storageops_list_{name}_{table} ON {table};" for table in tables]
        statements.append(f"DROP SEQUENCE storageops_list_version_{name};")
    return [*statements, "DROP FUNCTION storageops_list_changed();"]


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0031_help_texts_name_no_engine"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunSQL(forward_sql(), backward_sql())]
