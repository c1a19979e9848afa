//! `spec.orderedResources` (velero-compat §6.8): for a type named there, the listed items come
//! first, in the given order, then the rest in listing order.

use std::collections::{BTreeMap, HashMap};

/// The order given for a type: `orderedResources[<plural>]` split at commas (`"ns/name"` for
/// namespaced items, `"name"` for cluster-scoped ones). The key is the plain plural (`pods`),
/// without group, as in Velero. Empty when the type has no entry.
pub fn order_for_type<'a>(
    ordered_resources: &'a BTreeMap<String, String>,
    plural: &str,
) -> Vec<&'a str> {
    match ordered_resources.get(plural) {
        Some(order) if !order.is_empty() => order.split(',').collect(),
        _ => Vec::new(),
    }
}

/// The result of [`sort_by_order`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ordered<T> {
    /// Items in backup order, each with whether it was named in the order (consecutive
    /// ordered items of one type share an item block).
    pub items: Vec<(T, bool)>,
    /// Names in the order that matched no item (Velero logs a warning for each).
    pub not_found: Vec<String>,
}

/// Sorts `items` of one type by `order`; `full_name` gives an item's `ns/name` (or `name` for
/// a cluster-scoped item).
pub fn sort_by_order<T>(
    items: Vec<T>,
    order: &[&str],
    full_name: impl Fn(&T) -> String,
) -> Ordered<T> {
    if order.is_empty() {
        return Ordered {
            items: items.into_iter().map(|i| (i, false)).collect(),
            not_found: Vec::new(),
        };
    }
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    let index: HashMap<String, usize> = slots
        .iter()
        .enumerate()
        .filter_map(|(i, item)| item.as_ref().map(|it| (full_name(it), i)))
        .collect();
    let mut out = Vec::with_capacity(slots.len());
    let mut not_found = Vec::new();
    for name in order {
        match index.get(*name).and_then(|i| slots[*i].take()) {
            Some(item) => out.push((item, true)),
            None => not_found.push((*name).to_string()),
        }
    }
    out.extend(slots.into_iter().flatten().map(|item| (item, false)));
    Ordered {
        items: out,
        not_found,
    }
}
