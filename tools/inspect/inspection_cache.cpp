#include "tools/inspect/inspection_cache.h"

namespace tinylm {

template <class Key, class Value>
template <class Enough, class Make>
std::shared_ptr<const Value> InspectionCache::Kept<Key, Value>::get(
    const Key& key, Enough&& enough, Make&& make, std::atomic<int64_t>& computed) {
  std::shared_ptr<const Value> found;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (!(it->first == key)) continue;
      kept_.splice(kept_.begin(), kept_, it);
      if (enough(*it->second)) return it->second;
      found = it->second;
      break;
    }
  }
  auto made = std::make_shared<const Value>(make(found.get()));
  ++computed;
  const std::lock_guard<std::mutex> lock(mutex_);
  kept_.remove_if([&](const auto& entry) { return entry.first == key; });
  kept_.emplace_front(key, made);
  if (kept_.size() > kKept) kept_.pop_back();
  return made;
}

bool InspectionCache::WindowSet::operator==(const WindowSet& other) const {
  return source == other.source && exact == other.exact &&
         windows.sizes() == other.windows.sizes() && probe.sizes() == other.probe.sizes() &&
         torch::equal(windows, other.windows) && torch::equal(probe, other.probe);
}

std::shared_ptr<const WindowSetSurveys> InspectionCache::surveys(const InspectData& data,
                                                                 bool scores, bool attribution,
                                                                 const Survey& survey) {
  return surveys_.get(
      {data.source, data.windows, data.probe},
      [&](const WindowSetSurveys& s) {
        return (s.scores || !scores) && (s.attribution || !attribution);
      },
      [&](const WindowSetSurveys* kept) {
        return kept ? survey(scores || kept->scores, attribution || kept->attribution)
                    : survey(scores, attribution);
      },
      computed_);
}

std::shared_ptr<const AblationTable> InspectionCache::ablation(
    const InspectData& data, int64_t exact, const std::function<AblationTable()>& make) {
  return ablations_.get(
      {data.source, data.windows, data.probe, exact}, [](const AblationTable&) { return true; },
      [&](const AblationTable*) { return make(); }, computed_);
}

std::shared_ptr<const PositionLossView> InspectionCache::position_loss(
    const std::string& source, int64_t context, int64_t tokens,
    const std::function<PositionLossView()>& make) {
  return position_losses_.get(
      {source, std::to_string(context), tokens}, [](const PositionLossView&) { return true; },
      [&](const PositionLossView*) { return make(); }, computed_);
}

std::shared_ptr<const DriftView> InspectionCache::drift(const std::string& source,
                                                        const std::string& token, int64_t tokens,
                                                        const std::function<DriftView()>& make) {
  return drifts_.get(
      {source, token, tokens}, [](const DriftView&) { return true; },
      [&](const DriftView*) { return make(); }, computed_);
}

}  // namespace tinylm
