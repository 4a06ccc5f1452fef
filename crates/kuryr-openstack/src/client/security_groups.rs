//! Security groups and rules on [`OpenStackNeutron`]: the requests behind the [`Neutron`]
//! security-group methods (chunked lists and bulk creates, the default rules removed).

use super::*;
use crate::security_group::{
    SecurityGroup, SecurityGroupCreate, SecurityGroupFilter, SecurityGroupRule, SecurityGroupRuleCreate,
    SecurityGroupRuleFilter,
};

impl OpenStackNeutron {
    pub(super) async fn sg_list(&self, filter: &SecurityGroupFilter) -> Result<Vec<SecurityGroup>> {
        self.list_keyed(ops::SG_LIST, "security-groups", "security_groups", filter.query())
            .await
    }

    pub(super) async fn sg_create(&self, sg: &SecurityGroupCreate) -> Result<SecurityGroup> {
        let created: Value = self
            .create_tagged(
                (ops::SG_CREATE, ops::SG_SET_TAGS),
                "security-groups",
                "security_group",
                sg.to_json(self.tag_creation),
                &sg.tags,
            )
            .await?;
        let group: SecurityGroup = serde_json::from_value(created.clone()).map_err(|e| Error::Decode {
            op: ops::SG_CREATE,
            message: e.to_string(),
        })?;
        // Neutron answers with the rules it added (allow all egress, one per family).
        let defaults: Vec<String> = created
            .get("security_group_rules")
            .and_then(Value::as_array)
            .map(|rules| {
                rules
                    .iter()
                    .filter_map(|r| r.get("id")?.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        for id in &defaults {
            if let Err(e) = self.sg_rule_delete(id).await {
                if let Err(d) = self.delete(ops::SG_DELETE, "security-groups", &group.id).await {
                    tracing::warn!(security_group_id = %group.id, error = %d, "clean-up of a half-made security group failed");
                }
                return Err(e);
            }
        }
        Ok(group)
    }

    pub(super) async fn sg_delete(&self, id: &str) -> Result<()> {
        // Alone: no port's group change may be between its commit and its OVN update.
        let _barrier = self.sg_barrier.write().await;
        self.delete(ops::SG_DELETE, "security-groups", id).await
    }

    pub(super) async fn sg_rule_list(
        &self,
        filter: &SecurityGroupRuleFilter,
    ) -> Result<Vec<SecurityGroupRule>> {
        let mut all = Vec::new();
        for chunk in filter.security_group_ids.chunks(MAX_IDS_PER_REQUEST) {
            let part = SecurityGroupRuleFilter {
                security_group_ids: chunk.to_vec(),
            };
            all.extend(
                self.list_keyed::<SecurityGroupRule>(
                    ops::SG_RULE_LIST,
                    "security-group-rules",
                    "security_group_rules",
                    part.query(),
                )
                .await?,
            );
        }
        Ok(all)
    }

    pub(super) async fn sg_rule_bulk_create(
        &self,
        rules: &[SecurityGroupRuleCreate],
    ) -> Result<Vec<SecurityGroupRule>> {
        let mut created = Vec::with_capacity(rules.len());
        for chunk in rules.chunks(MAX_RULES_PER_REQUEST) {
            let items: Vec<Value> = chunk.iter().map(SecurityGroupRuleCreate::to_json).collect();
            let body = self
                .transport
                .call_bulk(
                    ops::SG_RULE_BULK_CREATE,
                    Method::POST,
                    "security-group-rules".into(),
                    json!({ "security_group_rules": items }),
                    chunk.len(),
                )
                .await?;
            created.extend(decode::<Vec<SecurityGroupRule>>(
                ops::SG_RULE_BULK_CREATE,
                &body,
                "security_group_rules",
            )?);
        }
        Ok(created)
    }

    pub(super) async fn sg_rule_delete(&self, id: &str) -> Result<()> {
        self.delete(ops::SG_RULE_DELETE, "security-group-rules", id).await
    }
}
